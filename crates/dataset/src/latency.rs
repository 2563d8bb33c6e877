//! The dataset's `latency` table: btt's latency breakdown (`ioblame latency`) in long form,
//! one row per group and interval with values (`docs/dataset.md`).

use ioblame_latency::output::{keyed_rows, Labels, PERCENTILES};
use ioblame_latency::Latency;
use polars::prelude::*;

/// The `latency` frame of `lat`: `group`, `dev`, `name`, `act` (null but on act rows),
/// `interval` (btt's name: `Q2C`, `D2C`, ...), `n`, `min_ns`, `mean_ns`, `p50_ns`, `p95_ns`,
/// `p99_ns`, `max_ns`. Groups in `ioblame latency`'s order; an interval without values has no
/// row. [`crate::schema::conform`] adds the key columns and makes the integers signed.
pub fn latency_frame(lat: &Latency, labels: &Labels<'_>) -> PolarsResult<DataFrame> {
    let (mut group, mut dev, mut name, mut act, mut interval) =
        (vec![], vec![], vec![], vec![], vec![]);
    let (mut n, mut min, mut mean, mut max) = (vec![], vec![], vec![], vec![]);
    let mut pct: [Vec<Option<u64>>; 3] = Default::default();
    for (key, stats) in keyed_rows(lat, labels) {
        for (i, s) in stats {
            group.push(key.group);
            dev.push(key.dev.clone());
            name.push(key.name.clone());
            act.push(key.act);
            interval.push(i.name());
            n.push(s.n);
            min.push(s.min);
            mean.push(s.mean());
            max.push(s.max);
            for (v, p) in pct.iter_mut().zip(PERCENTILES) {
                v.push(s.percentile(p));
            }
        }
    }
    let [p50, p95, p99] = pct;
    let rows = n.len();
    DataFrame::new(
        rows,
        vec![
            Column::new("group".into(), group),
            Column::new("dev".into(), dev),
            Column::new("name".into(), name),
            Column::new("act".into(), act),
            Column::new("interval".into(), interval),
            Column::new("n".into(), n),
            Column::new("min_ns".into(), min),
            Column::new("mean_ns".into(), mean),
            Column::new("p50_ns".into(), p50),
            Column::new("p95_ns".into(), p95),
            Column::new("p99_ns".into(), p99),
            Column::new("max_ns".into(), max),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use ioblame_latency::{Breakdown, Interval};

    #[test]
    fn one_row_per_group_and_interval_with_values() {
        let mut all = Breakdown::default();
        for v in [1_000, 2_000, 3_000] {
            all.add(Interval::Q2C, v);
        }
        all.add(Interval::D2C, 500);
        let mut act = Breakdown::default();
        act.add(Interval::Q2C, 1_000);
        act.add(Interval::Q2G, 7); // not an act row's interval
        let lat = Latency {
            all: all.clone(),
            devices: vec![((7 << 20) | 3, all)],
            acts: vec![(4, act)],
            ..Latency::default()
        };
        let df = latency_frame(&lat, &Labels::NONE).unwrap();
        let s = |c: &str| -> Vec<String> {
            df.column(c)
                .unwrap()
                .as_materialized_series()
                .iter()
                .map(|v| v.to_string().trim_matches('"').to_string())
                .collect()
        };
        assert_eq!(s("group"), ["all", "all", "device", "device", "act"]);
        assert_eq!(s("dev"), ["all", "all", "7:3", "7:3", "all"]);
        assert_eq!(s("name"), ["all", "all", "7:3", "7:3", "act #4"]);
        assert_eq!(s("act"), ["null", "null", "null", "null", "4"]);
        assert_eq!(s("interval"), ["D2C", "Q2C", "D2C", "Q2C", "Q2C"]);
        assert_eq!(s("n"), ["1", "3", "1", "3", "1"]);
        assert_eq!(s("min_ns"), ["500", "1000", "500", "1000", "1000"]);
        assert_eq!(s("max_ns"), ["500", "3000", "500", "3000", "1000"]);
        assert_eq!(s("mean_ns")[1], "2000.0");
        // Percentiles come from the histogram, within 0.39% of the exact value.
        let p50: f64 = s("p50_ns")[1].parse().unwrap();
        assert!((2000.0..=2000.0 * 1.0039).contains(&p50), "{p50}");
    }
}
