//! Intents and acts: kernel stacks interned and classified once each, intents (a stack plus
//! a modifier) and acts (role + intent + file) numbered in order of first use (see
//! docs/attribution.md, "Intents and acts" and "Intent modifiers (writeback reason)").

use std::sync::Arc;

use rustc_hash::FxHashMap;

use ioblame_decode::{Event, USER_MARK};

use crate::context::{classify_stack, Symbolizer};
use crate::contexts::NO_REASON;
use crate::model::*;
use crate::uspace::AddressSpaces;

/// Interned stack id (0 = empty stack).
pub(crate) type StackId = u32;

/// What tells acts apart: role, intent, file, link, and (for the lost intent) reason and
/// issuer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ActKey {
    /// The role charged.
    pub role: RoleId,
    /// The intent.
    pub intent: IntentId,
    /// The file.
    pub file: FileKey,
    /// How the IOs were linked.
    pub via: Via,
    /// The writeback reason, or [`NO_REASON`].
    pub reason: u32,
    /// For the lost intent: the task that queued the IO, when known.
    pub issuer: Option<RoleId>,
}

impl std::hash::Hash for ActKey {
    /// The fields in order, `issuer` as one number (`u32::MAX` for none): each act made
    /// costs a lookup, kept to one word per field.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.role.hash(state);
        self.intent.hash(state);
        self.file.hash(state);
        self.via.hash(state);
        self.reason.hash(state);
        self.issuer.map_or(u32::MAX, |r| r.0).hash(state);
    }
}

/// What `stack_by_ptr` holds for a decoded stack with user frames: its id depends on the
/// process ([`Intents::user_stack`]).
const WITH_USER: StackId = StackId::MAX;

/// A decoded stack held while its address keys a cache, and its id.
type Held = (Arc<[u64]>, StackId);

/// A decoded stack with user frames held while its address and process key a cache, its id,
/// and the generation of the process's mappings it was resolved in.
type HeldUser = (Arc<[u64]>, StackId, u64);

/// Most decoded stacks remembered by address (then the map starts over).
const STACK_BY_PTR_MAX: usize = 1 << 14;

/// The stacks seen, and the intents and acts made of them.
pub(crate) struct Intents {
    /// Kernel symbols, to classify each new stack (direct IO, journal).
    symbols: Option<Box<dyn Symbolizer + Send + Sync>>,
    /// The recorder's process: its acts are flagged.
    recorder_pid: Option<u32>,
    /// Stacks by id.
    stacks: Vec<Box<[u64]>>,
    /// Their classes ([`crate::context::STACK_DIO`], ...), by id.
    stack_flags: Vec<u8>,
    stack_index: FxHashMap<Box<[u64]>, StackId>,
    /// Decoded stacks by address: the decoder shares one allocation among the events with
    /// the same stack, so most lookups are by address. Each entry holds its stack, so an
    /// address cannot be reused by another stack while it is here. Bounded.
    stack_by_ptr: FxHashMap<usize, Held>,
    /// The address of the last stack looked up (in `stack_by_ptr`, or 0) and its id.
    last_stack: (usize, StackId),
    intent_index: FxHashMap<(u32, StackId), IntentId>,
    act_index: FxHashMap<ActKey, ActId>,
    /// Where user addresses go (user stacks recorded): a stack's user frames are interned
    /// as module offsets, so that one binary's frame is one frame in every process.
    pub spaces: AddressSpaces,
    /// User frames by id: an interned stack holds [`USER_MARK`] then their ids.
    user_frames: Vec<UserFrame>,
    user_frame_index: FxHashMap<UserFrame, u64>,
    /// Stacks with user frames by address and process, with the generation of the
    /// process's mappings they were resolved in.
    user_by_ptr: FxHashMap<(usize, u32), HeldUser>,
}

impl std::fmt::Debug for Intents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Intents")
            .field("symbols", &self.symbols.is_some())
            .field("stacks", &self.stacks.len())
            .field("intents", &self.intent_index.len())
            .field("acts", &self.act_index.len())
            .finish()
    }
}

impl Intents {
    /// No stack but the empty one (id 0) yet; new stacks are classified with `symbols`,
    /// and acts involving the process `recorder_pid` are flagged.
    pub fn new(
        symbols: Option<Box<dyn Symbolizer + Send + Sync>>,
        recorder_pid: Option<u32>,
    ) -> Intents {
        let mut stack_index = FxHashMap::default();
        stack_index.insert(Box::from([] as [u64; 0]), 0);
        Intents {
            symbols,
            recorder_pid,
            stacks: vec![Box::from([] as [u64; 0])],
            stack_flags: vec![0],
            stack_index,
            stack_by_ptr: FxHashMap::default(),
            last_stack: (0, 0),
            intent_index: FxHashMap::default(),
            act_index: FxHashMap::default(),
            spaces: AddressSpaces::default(),
            user_frames: Vec::new(),
            user_frame_index: FxHashMap::default(),
            user_by_ptr: FxHashMap::default(),
        }
    }

    /// The same, with the address spaces that name user frames.
    pub fn with_spaces(mut self, spaces: AddressSpaces) -> Intents {
        self.spaces = spaces;
        self
    }

    /// The id of `ev`'s stack: [`Intents::stack`] of its own stack, in its process.
    #[inline]
    pub fn stack_of(&mut self, ev: &Event) -> StackId {
        self.stack(ev.stack.as_ref(), ev.pid)
    }

    /// The id of a stack with user frames, taken in process `pid`: its user addresses
    /// made module offsets.
    fn user_stack(&mut self, a: &Arc<[u64]>, pid: u32) -> StackId {
        let key = (Arc::as_ptr(a) as *const u64 as usize, pid);
        // Valid while the process's mappings are as they were.
        let generation = self.spaces.generation(pid);
        if let Some(&(_, id, g)) = self.user_by_ptr.get(&key) {
            if g == generation {
                return id;
            }
        }
        let mark = a.iter().position(|&f| f == USER_MARK).unwrap_or(a.len());
        let mut frames: Vec<u64> = Vec::with_capacity(a.len());
        frames.extend_from_slice(&a[..=mark]);
        for &ip in &a[mark + 1..] {
            let mut f = self.spaces.frame(pid, ip);
            let astray = f.module.is_none();
            if astray {
                // Outside every recorded mapping: the walk went astray (a frame pointer
                // used as a register) or the mappings are unknown; what follows is not
                // trusted, and the address, a value of the stack, is not kept.
                f.offset = 0;
            }
            let next = self.user_frames.len() as u64;
            let id = *self.user_frame_index.entry(f.clone()).or_insert(next);
            if id == next {
                self.user_frames.push(f);
            }
            frames.push(id);
            if astray {
                break;
            }
        }
        let id = self.intern_frames(&frames);
        if self.user_by_ptr.len() >= STACK_BY_PTR_MAX {
            self.user_by_ptr.clear();
        }
        self.user_by_ptr.insert(key, (a.clone(), id, generation));
        id
    }

    /// The output tables' first two intents: #0 nomem and #1 lost, both with empty stacks.
    pub fn reserved() -> Vec<Intent> {
        let empty = Intent {
            modifier: 0,
            stack: Vec::new(),
            user: Vec::new(),
        };
        vec![empty.clone(), empty]
    }

    /// The id of an event's stack (the empty stack's when it has none), taken in process
    /// `pid` (which names its user frames, if it has some).
    #[inline]
    pub fn stack(&mut self, stack: Option<&Arc<[u64]>>, pid: u32) -> StackId {
        let Some(a) = stack else {
            return self.intern_frames(&[]);
        };
        let key = Arc::as_ptr(a) as *const u64 as usize;
        // Consecutive events often carry the same stack (one writer's page after page).
        if key == self.last_stack.0 {
            return self.last_stack.1;
        }
        let id = match self.stack_by_ptr.get(&key) {
            Some(&(_, id)) => id,
            None => {
                // Looked for once per decoded stack: one with user frames is marked, and
                // interned per process.
                let id = if a.contains(&USER_MARK) {
                    WITH_USER
                } else {
                    self.intern_frames(a)
                };
                if self.stack_by_ptr.len() >= STACK_BY_PTR_MAX {
                    self.stack_by_ptr.clear();
                    // Its stack may be gone with the map, and its address reused.
                    self.last_stack = (0, 0);
                }
                self.stack_by_ptr.insert(key, (a.clone(), id));
                id
            }
        };
        if id == WITH_USER {
            return self.user_stack(a, pid);
        }
        self.last_stack = (key, id);
        id
    }

    /// The id of a stack by its frames, classified when first seen.
    fn intern_frames(&mut self, s: &[u64]) -> StackId {
        if let Some(&id) = self.stack_index.get(s) {
            return id;
        }
        let id = self.stacks.len() as StackId;
        let b: Box<[u64]> = Box::from(s);
        let flags = self
            .symbols
            .as_deref()
            .map(|sym| classify_stack(sym, ioblame_decode::kernel_frames(s)))
            .unwrap_or(0);
        self.stacks.push(b.clone());
        self.stack_flags.push(flags);
        self.stack_index.insert(b, id);
        id
    }

    /// The kernel frames of stack `id` (empty for an unknown id).
    pub fn frames(&self, id: StackId) -> &[u64] {
        ioblame_decode::kernel_frames(self.stacks.get(id as usize).map_or(&[], |s| s))
    }

    /// The user frames of stack `id` (empty without).
    pub fn user_frames(&self, id: StackId) -> Vec<UserFrame> {
        let s = self.stacks.get(id as usize).map_or(&[][..], |s| s);
        ioblame_decode::user_frames(s)
            .iter()
            .filter_map(|&i| self.user_frames.get(i as usize).cloned())
            .collect()
    }

    /// The classes of stack `id` ([`crate::context::STACK_DIO`], ...).
    #[inline]
    pub fn flags(&self, id: StackId) -> u8 {
        self.stack_flags[id as usize]
    }

    /// The intent of `stack` with `modifier`, appended to `intents` when new.
    pub fn intent(&mut self, intents: &mut Vec<Intent>, modifier: u32, stack: StackId) -> IntentId {
        if let Some(&id) = self.intent_index.get(&(modifier, stack)) {
            return id;
        }
        let id = IntentId(intents.len() as u32);
        intents.push(Intent {
            modifier,
            stack: self.frames(stack).to_vec(),
            user: self.user_frames(stack),
        });
        self.intent_index.insert((modifier, stack), id);
        id
    }

    /// The act of `key`: appended to `tables` (with zero totals) when new.
    pub fn act(&mut self, tables: &mut Tables, key: ActKey) -> ActId {
        if let Some(&id) = self.act_index.get(&key) {
            return id;
        }
        let id = ActId(tables.acts.len() as u32);
        let recorder = self.recorder_pid.is_some_and(|p| {
            std::iter::once(key.role)
                .chain(key.issuer)
                .any(|r| tables.roles[r.index()].pid == p)
        });
        tables.acts.push(Act {
            role: key.role,
            intent: key.intent,
            file: key.file.clone(),
            via: key.via,
            reason: (key.reason != NO_REASON).then_some(WbReason(key.reason)),
            issuer: key.issuer,
            recorder,
        });
        tables.totals.push(ActTotals::default());
        self.act_index.insert(key, id);
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::{STACK_DIO, STACK_JOURNAL};

    fn role(pid: u32) -> Role {
        Role {
            pid,
            tid: pid,
            comm: format!("r{pid}"),
            generation: 0,
            cgroup: 0,
            lineage: false,
        }
    }

    #[test]
    fn stacks_are_interned_by_frames_whatever_their_allocation() {
        let mut i = Intents::new(None, None);
        let a: Arc<[u64]> = Arc::from(&[1u64, 2, 3][..]);
        let b: Arc<[u64]> = Arc::from(&[1u64, 2, 3][..]);
        let c: Arc<[u64]> = Arc::from(&[4u64][..]);
        assert_eq!(i.stack(None, 1), 0);
        let sa = i.stack(Some(&a), 1);
        assert_eq!(sa, 1);
        assert_eq!(i.stack(Some(&a), 1), sa);
        assert_eq!(i.stack(Some(&b), 1), sa);
        assert_eq!(i.stack(Some(&c), 1), 2);
        assert_eq!(i.stack(Some(&a), 1), sa);
        let empty: Arc<[u64]> = Arc::from(&[][..]);
        assert_eq!(i.stack(Some(&empty), 1), 0);
        assert_eq!(i.flags(sa), 0);
    }

    #[test]
    fn stacks_are_classified_once_by_their_symbols() {
        let sym = |a: u64| match a {
            1 => Some("submit_bio+0x10".to_string()),
            2 => Some("iomap_dio_rw+0x20".to_string()),
            3 => Some("jbd2_journal_commit_transaction".to_string()),
            _ => None,
        };
        let mut i = Intents::new(Some(Box::new(sym)), None);
        let dio = i.stack(Some(&Arc::from(&[1u64, 2][..])), 1);
        let journal = i.stack(Some(&Arc::from(&[1u64, 3][..])), 1);
        let plain = i.stack(Some(&Arc::from(&[1u64, 9][..])), 1);
        assert_eq!(i.flags(dio), STACK_DIO);
        assert_eq!(i.flags(journal), STACK_JOURNAL);
        assert_eq!(i.flags(plain), 0);
    }

    #[test]
    fn intents_and_acts_are_numbered_in_order_of_first_use() {
        let mut i = Intents::new(None, Some(2));
        let mut t = Tables {
            roles: vec![role(1), role(2)],
            intents: Intents::reserved(),
            ..Tables::default()
        };
        let s = i.stack(Some(&Arc::from(&[7u64, 8][..])), 1);
        let w = i.intent(&mut t.intents, WbReason(2).modifier(), s);
        let plain = i.intent(&mut t.intents, 0, s);
        assert_eq!((w, plain), (IntentId(2), IntentId(3)));
        assert_eq!(i.intent(&mut t.intents, WbReason(2).modifier(), s), w);
        assert_eq!(t.intents[2].stack, vec![7, 8]);
        assert_eq!(t.intents[2].modifier, 0x1000_0002);

        let page = ActKey {
            role: RoleId(0),
            intent: plain,
            file: FileKey { dev: 7, ino: 12 },
            via: Via::Page,
            reason: NO_REASON,
            issuer: None,
        };
        let a = i.act(&mut t, page.clone());
        assert_eq!(i.act(&mut t, page.clone()), a);
        // anything in the key differing: another act
        let buffer = ActKey {
            via: Via::Buffer,
            ..page.clone()
        };
        let b = i.act(&mut t, buffer);
        let wb = ActKey {
            intent: w,
            reason: 2,
            ..page.clone()
        };
        let c = i.act(&mut t, wb);
        let lost = ActKey {
            intent: INTENT_LOST,
            via: Via::Unknown,
            reason: 2,
            issuer: Some(RoleId(1)),
            ..page
        };
        let l = i.act(&mut t, lost.clone());
        assert_eq!(i.act(&mut t, lost), l);
        assert_eq!((a, b, c, l), (ActId(0), ActId(1), ActId(2), ActId(3)));
        assert_eq!(t.acts.len(), t.totals.len());
        assert_eq!(t.acts[2].reason, Some(WbReason(2)));
        assert_eq!(t.acts[0].reason, None);
        // the recorder (pid 2) acting or issuing
        assert!(!t.acts[0].recorder);
        assert!(t.acts[3].recorder);
        assert_eq!(t.acts[3].issuer, Some(RoleId(1)));
    }

    /// The by-address caches are emptied when full: the last stack looked up must not
    /// outlive its entry, or a new stack at its address would take its id.
    #[test]
    fn a_cache_emptied_forgets_the_last_stack_too() {
        let mut i = Intents::new(None, None);
        let mut keep = Vec::new();
        for n in 0..STACK_BY_PTR_MAX - 1 {
            let a: Arc<[u64]> = Arc::from(&[n as u64 + 1000, 7, 7, 7, 7][..]);
            i.stack(Some(&a), 1);
            keep.push(a);
        }
        let k: Arc<[u64]> = Arc::from(&[1u64, 2][..]);
        let idk = i.stack(Some(&k), 1);
        // A user stack fills the cache: it is emptied.
        let u: Arc<[u64]> = Arc::from(&[3u64, USER_MARK, 0x1000, 0x2000][..]);
        i.stack(Some(&u), 1);
        drop(k);
        // The allocator may give `[1, 2]`'s address to the next stack.
        let k2: Arc<[u64]> = Arc::from(&[5u64, 6][..]);
        assert_ne!(i.stack(Some(&k2), 1), idk);
    }
}
