//! The packet stream: each [`TracePacket`] appended to the file as a `Trace`'s field 1 as
//! soon as it is made, on one trusted packet sequence whose incremental state (the interned
//! event names, argument names and strings) is cleared by its first packet and given by the
//! packet that first uses each.

use std::io::{self, Write};

use prost::Message;
use rustc_hash::FxHashMap;

use crate::proto::{
    Data, DebugAnnotation, EventType, Interned, InternedBytes, InternedData, TracePacket,
    TrackDescriptor, TrackEvent, Value, SEQ_INCREMENTAL_STATE_CLEARED, SEQ_NEEDS_INCREMENTAL_STATE,
};

/// The trusted packet sequence every packet is on.
pub const SEQUENCE: u32 = 1;

/// An argument's value, before interning.
#[derive(Debug, Clone)]
pub enum Arg<'a> {
    /// A count, bytes, a time.
    U(u64),
    /// A text interned once per sequence (names, paths, stacks).
    S(&'a str),
    /// A text written out each time.
    Text(String),
    /// Named values under one name.
    Dict(Vec<(&'a str, Arg<'a>)>),
}

/// What each interned table has handed out.
#[derive(Debug, Default)]
struct Interner {
    event_names: FxHashMap<String, u64>,
    arg_names: FxHashMap<String, u64>,
    strings: FxHashMap<String, u64>,
}

/// Ids given from 1 in each table; new entries go into `new`.
fn intern(table: &mut FxHashMap<String, u64>, s: &str, new: &mut Vec<(u64, String)>) -> u64 {
    if let Some(&id) = table.get(s) {
        return id;
    }
    let id = table.len() as u64 + 1;
    table.insert(s.to_owned(), id);
    new.push((id, s.to_owned()));
    id
}

/// Writes packets to `W`.
pub struct PacketWriter<W: Write> {
    out: W,
    interned: Interner,
    buf: Vec<u8>,
    /// Bytes written.
    pub bytes: u64,
    /// Packets written.
    pub packets: u64,
}

impl<W: Write> PacketWriter<W> {
    /// A stream on `out`, its first packet written (it clears the sequence's state).
    pub fn new(out: W) -> io::Result<PacketWriter<W>> {
        let mut w = PacketWriter {
            out,
            interned: Interner::default(),
            buf: Vec::with_capacity(256),
            bytes: 0,
            packets: 0,
        };
        w.put(&TracePacket {
            trusted_packet_sequence_id: Some(SEQUENCE),
            sequence_flags: Some(SEQ_INCREMENTAL_STATE_CLEARED),
            first_packet_on_sequence: Some(true),
            ..TracePacket::default()
        })?;
        Ok(w)
    }

    fn put(&mut self, p: &TracePacket) -> io::Result<()> {
        self.buf.clear();
        // Trace.packet: field 1, length-delimited.
        self.buf.push(0x0a);
        p.encode_length_delimited(&mut self.buf)
            .map_err(io::Error::other)?;
        self.out.write_all(&self.buf)?;
        self.bytes += self.buf.len() as u64;
        self.packets += 1;
        Ok(())
    }

    /// A track's descriptor.
    pub fn track(&mut self, d: TrackDescriptor) -> io::Result<()> {
        self.put(&TracePacket {
            trusted_packet_sequence_id: Some(SEQUENCE),
            data: Some(Data::TrackDescriptor(d)),
            ..TracePacket::default()
        })
    }

    /// A slice's begin on `track` at `ts`: its name and arguments interned, with the flows
    /// that start (`flows`) and end (`ending`) at it.
    pub fn begin(
        &mut self,
        track: u64,
        ts: u64,
        name: &str,
        args: &[(&str, Arg<'_>)],
        flows: Vec<u64>,
        ending: Vec<u64>,
    ) -> io::Result<()> {
        let mut inter = InternedData::default();
        let mut new = Vec::new();
        let name_iid = intern(&mut self.interned.event_names, name, &mut new);
        inter.event_names = new
            .drain(..)
            .map(|(iid, name)| Interned {
                iid: Some(iid),
                name: Some(name),
            })
            .collect();
        let annotations = args
            .iter()
            .map(|(k, v)| self.annotation(k, v, &mut inter))
            .collect();
        self.event(
            ts,
            TrackEvent {
                r#type: Some(EventType::SliceBegin as i32),
                track_uuid: Some(track),
                name_iid: Some(name_iid),
                debug_annotations: annotations,
                flow_ids: flows,
                terminating_flow_ids: ending,
                ..TrackEvent::default()
            },
            inter,
        )
    }

    /// The end of the innermost open slice on `track`, at `ts`.
    pub fn end(&mut self, track: u64, ts: u64) -> io::Result<()> {
        self.event(
            ts,
            TrackEvent {
                r#type: Some(EventType::SliceEnd as i32),
                track_uuid: Some(track),
                ..TrackEvent::default()
            },
            InternedData::default(),
        )
    }

    /// A counter's value from `ts` on.
    pub fn counter(&mut self, track: u64, ts: u64, value: f64) -> io::Result<()> {
        self.event(
            ts,
            TrackEvent {
                r#type: Some(EventType::Counter as i32),
                track_uuid: Some(track),
                double_counter_value: Some(value),
                ..TrackEvent::default()
            },
            InternedData::default(),
        )
    }

    fn event(&mut self, ts: u64, e: TrackEvent, inter: InternedData) -> io::Result<()> {
        let empty = inter.event_names.is_empty()
            && inter.debug_annotation_names.is_empty()
            && inter.debug_annotation_string_values.is_empty();
        self.put(&TracePacket {
            timestamp: Some(ts),
            trusted_packet_sequence_id: Some(SEQUENCE),
            sequence_flags: Some(SEQ_NEEDS_INCREMENTAL_STATE),
            interned_data: (!empty).then_some(inter),
            data: Some(Data::TrackEvent(e)),
            ..TracePacket::default()
        })
    }

    fn annotation(&mut self, name: &str, v: &Arg<'_>, inter: &mut InternedData) -> DebugAnnotation {
        let mut new = Vec::new();
        let name_iid = intern(&mut self.interned.arg_names, name, &mut new);
        inter
            .debug_annotation_names
            .extend(new.drain(..).map(|(iid, name)| Interned {
                iid: Some(iid),
                name: Some(name),
            }));
        let mut a = DebugAnnotation {
            name_iid: Some(name_iid),
            ..DebugAnnotation::default()
        };
        match v {
            Arg::U(n) => a.value = Some(Value::Uint(*n)),
            Arg::Text(s) => a.value = Some(Value::String(s.clone())),
            Arg::S(s) => {
                let iid = intern(&mut self.interned.strings, s, &mut new);
                inter
                    .debug_annotation_string_values
                    .extend(new.drain(..).map(|(iid, s)| InternedBytes {
                        iid: Some(iid),
                        str: Some(s.into_bytes()),
                    }));
                a.value = Some(Value::StringIid(iid));
            }
            Arg::Dict(entries) => {
                a.dict_entries = entries
                    .iter()
                    .map(|(k, v)| self.annotation(k, v, inter))
                    .collect();
            }
        }
        a
    }

    /// Flushes and hands the output back.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::Data;

    /// The stream is a `Trace`: its packets decode one by one, the first clears the
    /// sequence's state, names are interned once.
    #[test]
    fn packets_are_a_trace_with_names_interned_once() {
        let mut w = PacketWriter::new(Vec::new()).unwrap();
        for ts in [10, 20] {
            w.begin(
                5,
                ts,
                "write",
                &[("bytes", Arg::U(4096)), ("file", Arg::S("/a"))],
                vec![],
                vec![],
            )
            .unwrap();
            w.end(5, ts + 5).unwrap();
        }
        let bytes = w.finish().unwrap();
        let mut rest = &bytes[..];
        let mut packets = Vec::new();
        while !rest.is_empty() {
            assert_eq!(rest[0], 0x0a);
            rest = &rest[1..];
            packets.push(TracePacket::decode_length_delimited(&mut rest).unwrap());
        }
        assert_eq!(packets.len(), 5);
        assert_eq!(
            packets[0].sequence_flags,
            Some(SEQ_INCREMENTAL_STATE_CLEARED)
        );
        let i1 = packets[1].interned_data.as_ref().unwrap();
        assert_eq!(i1.event_names.len(), 1);
        assert_eq!(i1.debug_annotation_names.len(), 2);
        assert_eq!(i1.debug_annotation_string_values.len(), 1);
        assert!(packets[3].interned_data.is_none());
        let Some(Data::TrackEvent(e)) = &packets[3].data else {
            panic!()
        };
        assert_eq!((e.name_iid, e.track_uuid), (Some(1), Some(5)));
        assert_eq!(e.debug_annotations[1].value, Some(Value::StringIid(1)));
    }
}
