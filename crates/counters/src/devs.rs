//! Device selection (`--devs`), with the semantics of ioblame's `devs` file.

use ioblame_attrib::Io;
use ioblame_format::BlockDevice;

use crate::device::{maj_min, resolve_name};
use crate::error::{DevError, DevSyntax};

/// Which devices are analysed.
///
/// Parsed from white-space separated items, each a device name (`sda`, `/dev/sda`) or
/// `MAJ:MIN`, optionally preceded by `!`. Items apply in order: a plain item enables its
/// device, a `!` item disables it. With no item at all every device is enabled; if the first
/// item is a plain one, every other device starts disabled (as `echo sda sdb > devs` did),
/// otherwise every device starts enabled.
///
/// Names are resolved against the trace's own device table, not the analysing machine's.
/// A `MAJ:MIN` need not be in the table (the trace may hold IO of a device created after the
/// table was taken). Devices are matched exactly: selecting a partition does not select IO
/// that the block layer reports on its whole disk (requests are issued and completed on the
/// disk); [`DevSelection::warnings`] says so when a selected device had no IO.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DevSelection {
    /// State of every device not in `overrides`.
    default: bool,
    /// Devices (kernel encoding) with their final state, in first-mention order.
    overrides: Vec<(u32, bool)>,
}

impl Default for DevSelection {
    fn default() -> Self {
        DevSelection::all()
    }
}

impl DevSelection {
    /// Every device enabled.
    pub fn all() -> DevSelection {
        DevSelection {
            default: true,
            overrides: Vec::new(),
        }
    }

    /// Parses a selection such as `sda sdb !8:0`, resolving names against `devices`.
    pub fn parse(spec: &str, devices: &[BlockDevice]) -> Result<DevSelection, DevError> {
        let mut sel = DevSelection::all();
        for (n, item) in spec.split_whitespace().enumerate() {
            let (enable, name) = match item.strip_prefix('!') {
                Some(rest) => (false, rest),
                None => (true, item),
            };
            if name.is_empty() {
                return Err(DevError::Syntax {
                    item: item.to_string(),
                    why: DevSyntax::MissingAfterBang,
                });
            }
            let dev = resolve(name, item, devices)?;
            if n == 0 {
                sel.default = !enable;
            }
            match sel.overrides.iter_mut().find(|(d, _)| *d == dev) {
                Some(o) => o.1 = enable,
                None => sel.overrides.push((dev, enable)),
            }
        }
        Ok(sel)
    }

    /// Whether a device (kernel encoding `major << 20 | minor`) is enabled.
    #[inline]
    pub fn enabled(&self, dev: u32) -> bool {
        self.overrides
            .iter()
            .find(|(d, _)| *d == dev)
            .map_or(self.default, |(_, e)| *e)
    }

    /// Whether the device of an IO is enabled.
    #[inline]
    pub fn enabled_io(&self, io: &Io) -> bool {
        self.enabled(io.dev)
    }

    /// Whether every device is enabled.
    pub fn is_all(&self) -> bool {
        self.default && self.overrides.iter().all(|(_, e)| *e)
    }

    /// Warnings for the devices the selection names and enables (plain items) that had no
    /// IO (`has_io(dev)` false, `dev` in the kernel encoding): each says so and, for a
    /// partition of the trace's device table, that the block layer counts its requests on
    /// its whole disk. Devices enabled only by default are not named.
    pub fn warnings(&self, devices: &[BlockDevice], has_io: impl Fn(u32) -> bool) -> Vec<String> {
        let mut v = Vec::new();
        for &(dev, enabled) in &self.overrides {
            if !enabled || has_io(dev) {
                continue;
            }
            let entry = devices.iter().find(|d| d.kernel_dev() == dev);
            let mut w = match entry {
                Some(d) => format!(
                    "--devs selects {} ({}:{}), which has no IO in the trace",
                    d.name, d.major, d.minor
                ),
                None => format!(
                    "--devs selects {}:{}, which has no IO in the trace",
                    dev >> 20,
                    dev & 0xfffff
                ),
            };
            if let Some(d) = entry.filter(|d| !d.parent.is_empty()) {
                match devices.iter().find(|p| p.name == d.parent) {
                    Some(p) => w.push_str(&format!(
                        ": it is a partition, and the block layer counts its requests on the whole disk {} ({}:{}); select {} instead",
                        p.name, p.major, p.minor, p.name
                    )),
                    None => w.push_str(&format!(
                        ": it is a partition, and the block layer counts its requests on the whole disk {}; select it instead",
                        d.parent
                    )),
                }
            }
            v.push(w);
        }
        v
    }

    /// The devices of the table that are enabled, in table order (what `cat devs` listed).
    pub fn enabled_devices<'d>(&self, devices: &'d [BlockDevice]) -> Vec<&'d BlockDevice> {
        devices
            .iter()
            .filter(|d| self.enabled(d.kernel_dev()))
            .collect()
    }
}

fn resolve(name: &str, item: &str, devices: &[BlockDevice]) -> Result<u32, DevError> {
    match name.split_once(':') {
        Some((ma, mi)) => maj_min(ma, mi).ok_or_else(|| DevError::Syntax {
            item: item.to_string(),
            why: DevSyntax::BadMajMin,
        }),
        None => resolve_name(name, devices),
    }
}
