//! docs/counters.md documents the default counters exactly.

use ioblame_counters::DEFAULT_COUNTERS;

#[test]
fn docs_list_the_default_counters() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/counters.md");
    let text = std::fs::read_to_string(path).expect("docs/counters.md");
    let section = text
        .split("## The default counters")
        .nth(1)
        .expect("a section on the default counters")
        .split("\n## ")
        .next()
        .unwrap();
    let rows: Vec<(usize, &str)> = section
        .lines()
        .filter_map(|l| {
            let mut cells = l.split('|').map(str::trim).skip(1);
            let n = cells.next()?.parse().ok()?;
            let spec = cells.next()?.strip_prefix('`')?.strip_suffix('`')?;
            Some((n, spec))
        })
        .collect();
    let want: Vec<(usize, &str)> = DEFAULT_COUNTERS.iter().copied().enumerate().collect();
    assert_eq!(rows, want);
}
