//! This process's memory map: which file a loaded symbol came from, so the
//! tools can say which libdat2/provider actually answered.

use std::path::PathBuf;

/// The file mapped at `addr` in this process, from /proc/self/maps.
pub fn mapped_file(addr: usize) -> Option<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines().find_map(|l| {
        let mut it = l.split_whitespace();
        let (lo, hi) = it.next()?.split_once('-')?;
        let (lo, hi) = (usize::from_str_radix(lo, 16).ok()?, usize::from_str_radix(hi, 16).ok()?);
        let path = it.nth(4)?;
        (lo <= addr && addr < hi && path.starts_with('/')).then(|| PathBuf::from(path))
    })
}

#[cfg(test)]
mod tests {
    use super::mapped_file;

    #[test]
    fn finds_the_test_binary_itself() {
        let here = mapped_file(finds_the_test_binary_itself as *const () as usize).expect("own code is mapped from a file");
        let exe = std::env::current_exe().unwrap();
        assert_eq!(here.file_name(), exe.file_name());
    }

    #[test]
    fn heap_is_no_file() {
        let b = Box::new(7u64);
        assert_eq!(mapped_file(&*b as *const u64 as usize), None);
    }
}
