//! What the timeline keeps: the window, the cap on slices (the earliest kept) and on flows,
//! and the flows numbered.

use rustc_hash::FxHashMap;

use crate::build::Collected;
use crate::{on_role_track, Options, Stats};

/// What is drawn, and the flows.
pub(crate) struct Selection {
    /// Per run, request and fsync of [`Collected`], whether it is drawn.
    pub keep_run: Vec<bool>,
    /// See [`Selection::keep_run`].
    pub keep_blocked: Vec<bool>,
    /// The requests drawn, by queue time.
    pub order: Vec<u32>,
    /// Each run's flows (ids from 1).
    pub run_flows: Vec<Vec<u64>>,
    /// The flows ending at each request.
    pub req_flows: FxHashMap<u32, Vec<u64>>,
    /// The flow from each read or direct IO slice (by request and part) to its request.
    pub read_flows: FxHashMap<(u32, u32), u64>,
}

/// Selects what `opts` keeps of `c`, counting what it leaves out in `stats`.
pub(crate) fn select(c: &Collected, opts: &Options, stats: &mut Stats) -> Selection {
    let (from, to) = opts.window;
    // What the window keeps.
    let overlaps = |a: u64, b: u64| b >= from && a < to;
    let mut keep_run: Vec<bool> = c.runs.iter().map(|r| overlaps(r.start, r.end)).collect();
    let mut keep_req: Vec<bool> = c
        .requests
        .iter()
        .map(|r| (from..to).contains(&r.queue))
        .collect();
    let mut keep_blocked: Vec<bool> = c.blocked.iter().map(|b| overlaps(b.start, b.end)).collect();
    // The cap: the earliest slices.
    let mut starts: Vec<(u64, u8, u32, u64)> = Vec::new();
    for (i, r) in c.runs.iter().enumerate().filter(|(i, _)| keep_run[*i]) {
        starts.push((r.start, 0, i as u32, 1));
    }
    for (i, r) in c.requests.iter().enumerate().filter(|(i, _)| keep_req[*i]) {
        let n = 1 + r.parts.iter().filter(|p| on_role_track(p)).count() as u64;
        starts.push((r.queue, 1, i as u32, n));
    }
    for (i, b) in c
        .blocked
        .iter()
        .enumerate()
        .filter(|(i, _)| keep_blocked[*i])
    {
        starts.push((b.start, 2, i as u32, 1));
    }
    starts.sort_unstable();
    let mut n = 0u64;
    for &(ts, kind, i, k) in &starts {
        if n + k <= opts.max_slices {
            n += k;
            continue;
        }
        if stats.slices_left_out.0 == 0 {
            stats.slices_left_out.2 = ts;
        }
        stats.slices_left_out.0 += k;
        match kind {
            0 => keep_run[i as usize] = false,
            1 => {
                keep_req[i as usize] = false;
                stats.slices_left_out.1 += c.requests[i as usize].bytes;
            }
            _ => keep_blocked[i as usize] = false,
        }
    }

    // Flows: run -> request part, and read slice -> its request, numbered from 1.
    let mut next_flow = 1u64;
    let mut run_flows: Vec<Vec<u64>> = vec![Vec::new(); c.runs.len()];
    let mut req_flows: FxHashMap<u32, Vec<u64>> = FxHashMap::default();
    let mut read_flows: FxHashMap<(u32, u32), u64> = FxHashMap::default();
    let mut take_flow = |stats: &mut Stats| {
        if stats.flows < opts.max_flows {
            stats.flows += 1;
            let f = next_flow;
            next_flow += 1;
            Some(f)
        } else {
            stats.flows_left_out += 1;
            None
        }
    };
    for (ri, r) in c.runs.iter().enumerate().filter(|(i, _)| keep_run[*i]) {
        let mut linked: Vec<u32> = r.links.iter().map(|l| l.0).collect();
        linked.dedup();
        for q in linked {
            if !keep_req[q as usize] {
                continue;
            }
            if let Some(f) = take_flow(stats) {
                run_flows[ri].push(f);
                req_flows.entry(q).or_default().push(f);
            }
        }
    }
    for (qi, r) in c.requests.iter().enumerate().filter(|(i, _)| keep_req[*i]) {
        for (pi, p) in r.parts.iter().enumerate() {
            if on_role_track(p) {
                if let Some(f) = take_flow(stats) {
                    read_flows.insert((qi as u32, pi as u32), f);
                    req_flows.entry(qi as u32).or_default().push(f);
                }
            }
        }
    }

    let mut order: Vec<u32> = (0..c.requests.len() as u32)
        .filter(|&i| keep_req[i as usize])
        .collect();
    order.sort_by_key(|&i| (c.requests[i as usize].queue, i));
    Selection {
        keep_run,
        keep_blocked,
        order,
        run_flows,
        req_flows,
        read_flows,
    }
}
