//! NUMA memory policy: which node holds the pages of a range (`mbind`), and where its
//! resident pages lie now (`move_pages` asked, not told, to move). Kept with the crate's
//! other `unsafe` so the system calls are audited in one place.

/// `MPOL_PREFERRED` (linux/mempolicy.h): allocate on the node, fall back to others when
/// it is full (a far tier that fills up slows down; it does not fail allocations).
#[cfg(target_os = "linux")]
const MPOL_PREFERRED: libc::c_long = 1;
/// `MPOL_MF_MOVE`: pages of the range already resident move to the node too.
#[cfg(target_os = "linux")]
const MPOL_MF_MOVE: libc::c_ulong = 1 << 1;

/// Most node ids the calls take (the manifest's limit on node ids is 1023).
pub const MAX_NODES: usize = 1024;

/// The whole pages inside `[start, start + len)`: their first address, byte length and
/// the page size (none when the range holds no whole page). Partial pages at either end belong to other
/// memory too and are left alone.
#[cfg(target_os = "linux")]
fn whole_pages(start: usize, len: usize) -> Option<(usize, usize, usize)> {
    // SAFETY: sysconf takes an integer and reads no memory of ours.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
        .ok()
        .filter(|&page| page.is_power_of_two())?;
    let first = start.checked_next_multiple_of(page)?;
    let end = (start.checked_add(len)?) / page * page;
    (end > first).then(|| (first, end - first, page))
}

/// Makes NUMA node `node` the preferred home of the whole pages of `[start, start + len)`:
/// resident ones move there now, later ones are allocated there on first touch. The
/// error says why the kernel refused (no such node, a container without the call).
///
/// # Safety
/// The range must lie in one live allocation of this process (the policy follows the
/// pages; contents never change).
pub unsafe fn prefer_node(start: *const u8, len: usize, node: usize) -> Result<(), String> {
    if node >= MAX_NODES {
        return Err(format!("node {node} is over {}", MAX_NODES - 1));
    }
    #[cfg(target_os = "linux")]
    {
        let Some((first, bytes, _)) = whole_pages(start as usize, len) else {
            return Ok(());
        };
        let mut mask = [0_u64; MAX_NODES / 64];
        mask[node / 64] |= 1 << (node % 64);
        // the kernel reads `maxnode - 1` bits of the mask
        let words = node / 64 + 1;
        // SAFETY: `[first, first + bytes)` is whole pages inside the caller's allocation
        // (the contract above); the kernel reads `words` words of `mask`, which has them;
        // mbind only changes where the pages live, never their contents.
        let result = unsafe {
            libc::syscall(
                libc::SYS_mbind,
                first,
                bytes,
                MPOL_PREFERRED,
                mask.as_ptr(),
                words * 64 + 1,
                MPOL_MF_MOVE,
            )
        };
        if result == 0 {
            Ok(())
        } else {
            Err(format!(
                "mbind to node {node}: {}",
                std::io::Error::last_os_error()
            ))
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (start, len);
        Err("NUMA memory policy is not supported on this OS".to_string())
    }
}

/// How many resident whole pages of `[start, start + len)` lie on each node, as
/// `(node, pages)` ascending by node; pages never touched are not counted.
///
/// # Safety
/// As [`prefer_node`]: the range lies in one live allocation of this process.
pub unsafe fn resident_pages(start: *const u8, len: usize) -> Result<Vec<(usize, usize)>, String> {
    #[cfg(target_os = "linux")]
    {
        let Some((first, bytes, page)) = whole_pages(start as usize, len) else {
            return Ok(Vec::new());
        };
        let pages: Vec<*const libc::c_void> = (first..first + bytes)
            .step_by(page)
            .map(|address| address as *const libc::c_void)
            .collect();
        let mut status = vec![0_i32; pages.len()];
        // SAFETY: `pages` and `status` hold `pages.len()` entries each; a null `nodes`
        // makes move_pages only report each page's node into `status` (nothing moves).
        let result = unsafe {
            libc::syscall(
                libc::SYS_move_pages,
                0,
                pages.len(),
                pages.as_ptr(),
                std::ptr::null::<i32>(),
                status.as_mut_ptr(),
                0,
            )
        };
        if result != 0 {
            return Err(format!("move_pages: {}", std::io::Error::last_os_error()));
        }
        let mut counts = std::collections::BTreeMap::new();
        for node in status
            .into_iter()
            .filter_map(|node| usize::try_from(node).ok())
        {
            *counts.entry(node).or_insert(0) += 1;
        }
        Ok(counts.into_iter().collect())
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (start, len);
        Err("NUMA memory policy is not supported on this OS".to_string())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    #[cfg(target_os = "linux")]
    fn pages_preferred_on_a_node_stay_readable_and_a_missing_node_is_refused() {
        let buffer: Vec<u8> = (0..(1 << 20)).map(|i| (i % 251) as u8).collect();
        let start = buffer.as_ptr();
        // SAFETY: the range is `buffer`'s own bytes.
        let before = unsafe { super::resident_pages(start, buffer.len()) }.unwrap();
        let pages: usize = before.iter().map(|(_, pages)| pages).sum();
        assert!(pages >= 255, "the touched buffer is resident: {before:?}");
        let home = before[0].0;
        // SAFETY: as above.
        match unsafe { super::prefer_node(start, buffer.len(), home) } {
            Ok(()) => {
                // SAFETY: as above.
                let after = unsafe { super::resident_pages(start, buffer.len()) }.unwrap();
                assert_eq!(after.iter().map(|(_, pages)| pages).sum::<usize>(), pages);
                assert!(after.iter().any(|&(node, _)| node == home), "{after:?}");
            }
            // a container whose seccomp profile withholds mbind: the reason is named
            Err(reason) => assert!(reason.starts_with("mbind to node"), "{reason}"),
        }
        assert!(buffer
            .iter()
            .enumerate()
            .all(|(i, &b)| b == (i % 251) as u8));
        // SAFETY: as above.
        let refused = unsafe { super::prefer_node(start, buffer.len(), super::MAX_NODES) };
        assert_eq!(refused, Err("node 1024 is over 1023".to_string()));
        // SAFETY: as above.
        let absent = unsafe { super::prefer_node(start, buffer.len(), 1000) }.unwrap_err();
        assert!(absent.starts_with("mbind to node 1000: "), "{absent}");
    }
}
