#!/usr/bin/env python3
"""Decodes an `ioblame timeline` file with Perfetto's own schema (the `perfetto` Python
package's perfetto_trace_pb2) and checks it as Perfetto reads it:

- one trusted packet sequence, its incremental state cleared by its first packet, every
  interned id given before it is used;
- every track described before its first event, every parent described before its child;
- on every track, slices nest: each end closes the innermost open slice, in time order, and
  none is left open;
- every flow has both ends: an id in one slice's flow_ids and in another's
  terminating_flow_ids, on different tracks, the start no later than the end, and read
  first (Perfetto binds a flow's ends in the order it reads them).

Prints a JSON summary on stdout: the counts, each act's bytes on the device slices
(`io_bytes`) and on the dirtying slices (`written_bytes`), the flows as (source, device track
name, count) triples (the source a thread's name, or a device's for the arrows from a request
to one that waited behind it), and the threads with fsync slices. Exit 1 with the problems on stderr when a check fails.

Usage: timeline-check.py FILE
"""

import json
import sys
from collections import defaultdict

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb


def main(path):
    trace = pb.Trace()
    with open(path, "rb") as f:
        trace.ParseFromString(f.read())
    problems = []
    tracks = {}  # uuid -> descriptor
    event_names, arg_names, strings = {}, {}, {}
    sequences = set()
    cleared = False
    open_slices = defaultdict(list)  # track -> [(ts, name, flow_ids)]
    last_ts = defaultdict(int)
    flow_start, flow_end = {}, {}
    slices = 0
    io_bytes = defaultdict(int)
    written = defaultdict(int)
    counters = 0
    fsync_threads = set()

    def arg_value(a):
        kind = a.WhichOneof("value")
        if kind == "string_value_iid":
            if a.string_value_iid not in strings:
                problems.append(f"string iid {a.string_value_iid} used before it was interned")
            return strings.get(a.string_value_iid)
        if kind is None:
            return {arg_names.get(e.name_iid, e.name): arg_value(e) for e in a.dict_entries}
        return getattr(a, kind)

    def args_of(e):
        out = {}
        for a in e.debug_annotations:
            if a.name_iid and a.name_iid not in arg_names:
                problems.append(f"argument name iid {a.name_iid} used before it was interned")
            out[arg_names.get(a.name_iid, a.name)] = arg_value(a)
        return out

    def thread_of(uuid):
        # A thread's child track's thread.
        d = tracks.get(uuid)
        while d is not None and not d.HasField("thread") and d.HasField("parent_uuid"):
            d = tracks.get(d.parent_uuid)
        return d.thread.thread_name if d is not None and d.HasField("thread") else None

    def device_of(uuid):
        # A lane's parent is its device track.
        d = tracks.get(uuid)
        while d is not None and d.HasField("parent_uuid"):
            d = tracks.get(d.parent_uuid)
        return d

    for i, p in enumerate(trace.packet):
        sequences.add(p.trusted_packet_sequence_id)
        if i == 0:
            cleared = bool(p.sequence_flags & 1)
        if p.HasField("interned_data"):
            for n in p.interned_data.event_names:
                event_names[n.iid] = n.name
            for n in p.interned_data.debug_annotation_names:
                arg_names[n.iid] = n.name
            for n in p.interned_data.debug_annotation_string_values:
                strings[n.iid] = n.str.decode()
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            if d.uuid in tracks:
                problems.append(f"track {d.uuid} described twice")
            if d.HasField("parent_uuid") and d.parent_uuid not in tracks:
                problems.append(f"track {d.uuid}'s parent {d.parent_uuid} not described before it")
            tracks[d.uuid] = d
            continue
        if not p.HasField("track_event"):
            continue
        e = p.track_event
        if e.track_uuid not in tracks:
            problems.append(f"event at {p.timestamp} on track {e.track_uuid}, not described before")
        if p.timestamp < last_ts[e.track_uuid]:
            problems.append(f"track {e.track_uuid}: event at {p.timestamp} after {last_ts[e.track_uuid]}")
        last_ts[e.track_uuid] = p.timestamp
        if e.type == pb.TrackEvent.TYPE_COUNTER:
            counters += 1
            continue
        if e.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            if e.name_iid not in event_names:
                problems.append(f"event name iid {e.name_iid} used before it was interned")
            name = event_names.get(e.name_iid, "?")
            args = args_of(e)
            slices += 1
            for f in e.flow_ids:
                if f in flow_start:
                    problems.append(f"flow {f} starts twice")
                flow_start[f] = (p.timestamp, e.track_uuid, i)
            for f in e.terminating_flow_ids:
                if f in flow_end:
                    problems.append(f"flow {f} ends twice")
                flow_end[f] = (p.timestamp, e.track_uuid, i)
            open_slices[e.track_uuid].append(name)
            if name == "fsync":
                fsync_threads.add(thread_of(e.track_uuid))
            # A device's request: its parts' bytes by act.
            dev = device_of(e.track_uuid)
            if dev is not None and dev.name.startswith("device ") and "bytes" in args:
                parts = args.get("parts") or {"part 1": args}
                for part in parts.values():
                    # A loop device's backing-file copy counts for its device, not again
                    # for the act (as in `ioblame acts`).
                    if not part.get("lower_copy"):
                        io_bytes[part["act"]] += part["act_bytes"]
            for key, b in (args.get("written_by_act") or {}).items():
                written[int(key.split()[1])] += b
        elif e.type == pb.TrackEvent.TYPE_SLICE_END:
            if not open_slices[e.track_uuid]:
                problems.append(f"track {e.track_uuid}: an end at {p.timestamp} with no slice open")
            else:
                open_slices[e.track_uuid].pop()
    for t, stack in open_slices.items():
        if stack:
            problems.append(f"track {t}: {len(stack)} slices left open ({stack[-1]})")
    if len(sequences) != 1:
        problems.append(f"{len(sequences)} packet sequences, not one")
    if not cleared:
        problems.append("the first packet does not clear the sequence's incremental state")
    pairs = defaultdict(int)
    for f, (ts, track, at) in flow_start.items():
        if f not in flow_end:
            problems.append(f"flow {f} has no end")
            continue
        ets, etrack, eat = flow_end[f]
        if eat < at:
            problems.append(f"flow {f}: its end is in packet {eat}, before its start in {at}")
        if etrack == track:
            problems.append(f"flow {f} starts and ends on one track")
        if ets < ts:
            problems.append(f"flow {f} ends at {ets}, before it starts at {ts}")
        src = thread_of(track)
        if src is None:
            # A request that another waited behind: its device.
            d = device_of(track)
            src = d.name if d is not None else tracks[track].name
        dev = device_of(etrack)
        pairs[(src, dev.name if dev is not None else "?")] += 1
    for f in flow_end:
        if f not in flow_start:
            problems.append(f"flow {f} has no start")
    summary = {
        "packets": len(trace.packet),
        "tracks": len(tracks),
        "slices": slices,
        "counters": counters,
        "flows": len(flow_start),
        "io_bytes": {str(k): v for k, v in sorted(io_bytes.items())},
        "written_bytes": {str(k): v for k, v in sorted(written.items())},
        "flow_pairs": [[s, d, n] for (s, d), n in sorted(pairs.items())],
        "fsync_threads": sorted(t for t in fsync_threads if t),
    }
    print(json.dumps(summary))
    if problems:
        for p in problems[:50]:
            print(f"timeline-check: {p}", file=sys.stderr)
        print(f"timeline-check: {len(problems)} problems", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
