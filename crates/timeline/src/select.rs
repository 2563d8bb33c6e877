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
    /// The flows starting at each request to the requests that waited behind it.
    pub culprit_flows: FxHashMap<u32, Vec<u64>>,
    /// The flow ending at each request's on-device part from the request it waited behind
    /// most.
    pub victim_flows: FxHashMap<u32, u64>,
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
    let mut run_flows: Vec<Vec<u64>> = vec![Vec::new(); c.runs.len()];
    let mut req_flows: FxHashMap<u32, Vec<u64>> = FxHashMap::default();
    let mut read_flows: FxHashMap<(u32, u32), u64> = FxHashMap::default();
    // A flow's id is its number: the flows taken so far.
    let take_flow = |stats: &mut Stats| {
        if stats.flows < opts.max_flows {
            stats.flows += 1;
            Some(stats.flows)
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
    let mut culprit_flows: FxHashMap<u32, Vec<u64>> = FxHashMap::default();
    let mut victim_flows: FxHashMap<u32, u64> = FxHashMap::default();
    for (v, culprit) in waited_behind(c, &order) {
        if let Some(f) = take_flow(stats) {
            culprit_flows.entry(culprit).or_default().push(f);
            victim_flows.insert(v, f);
        }
    }
    Selection {
        keep_run,
        keep_blocked,
        order,
        run_flows,
        req_flows,
        read_flows,
        culprit_flows,
        victim_flows,
    }
}

/// For each request drawn (`order`, by queue time) that waited to be issued while others
/// were on its device, the one in flight the longest during that wait: (victim, culprit).
/// `ioblame blame` splits the whole wait among all of them (docs/latency.md, "Blame"); the
/// timeline draws one arrow, from the request that stood ahead of it longest.
pub(crate) fn waited_behind(c: &Collected, order: &[u32]) -> Vec<(u32, u32)> {
    let mut by_dev: FxHashMap<u32, Vec<u32>> = FxHashMap::default();
    for &q in order {
        by_dev
            .entry(c.requests[q as usize].dev)
            .or_default()
            .push(q);
    }
    let mut out = Vec::new();
    let mut devs: Vec<_> = by_dev.into_iter().collect();
    devs.sort_unstable_by_key(|d| d.0);
    for (_, list) in devs {
        // By issue time: the requests issued before a victim, back to those issued before
        // its queueing that were still in flight then.
        let mut by_issue = list.clone();
        by_issue.sort_by_key(|&q| (c.requests[q as usize].issue, q));
        let issues: Vec<u64> = by_issue
            .iter()
            .map(|&q| c.requests[q as usize].issue)
            .collect();
        // The longest time on the device, to bound the look back.
        let longest = list
            .iter()
            .map(|&q| {
                let r = &c.requests[q as usize];
                r.complete.saturating_sub(r.issue)
            })
            .max()
            .unwrap_or(0);
        for &v in &list {
            let r = &c.requests[v as usize];
            if r.issue <= r.queue {
                continue;
            }
            let end = issues.partition_point(|&t| t < r.issue);
            let start = issues.partition_point(|&t| t < r.queue.saturating_sub(longest));
            let mut best: Option<(u64, u32)> = None;
            for &k in &by_issue[start..end] {
                if k == v {
                    continue;
                }
                let o = &c.requests[k as usize];
                let overlap = o.complete.min(r.issue).saturating_sub(o.issue.max(r.queue));
                if overlap > 0 && best.is_none_or(|b| overlap > b.0) {
                    best = Some((overlap, k));
                }
            }
            if let Some((_, k)) = best {
                out.push((v, k));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::Request;
    use ioblame_attrib::Dir;

    fn req(dev: u32, queue: u64, issue: u64, complete: u64) -> Request {
        Request {
            dev,
            sector: 0,
            bytes: 4096,
            dir: Dir::R,
            rwbs: "R".into(),
            queue,
            issue,
            complete,
            parts: Vec::new(),
        }
    }

    /// A request's arrow comes from the one in flight longest while it waited on its device;
    /// another device's, and one issued after it, do not count; one that waited for nothing
    /// has none.
    #[test]
    fn a_wait_is_drawn_from_the_request_ahead_longest() {
        let c = Collected {
            requests: vec![
                req(1, 100, 300, 400), // the victim
                req(1, 40, 50, 150),   // in flight 100..150: 50
                req(1, 110, 120, 290), // 120..290: 170; itself behind the one before
                req(2, 100, 100, 300), // another device
                req(1, 250, 350, 500), // issued after the victim
                req(1, 500, 500, 600), // waited for nothing
            ],
            ..Collected::default()
        };
        let order: Vec<u32> = (0..c.requests.len() as u32).collect();
        assert_eq!(waited_behind(&c, &order), vec![(0, 2), (2, 1), (4, 0)]);
    }
}
