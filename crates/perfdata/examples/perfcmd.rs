//! Prints the `perf record` command line for the running kernel and the given devices.
fn main() {
    let devices: Vec<String> = std::env::args().skip(1).collect();
    match ioblame_perfdata::perf_command(&devices, ioblame_perfdata::Stacks::Exact) {
        Ok(line) => println!("{line}"),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
