//! Thread scheduling: the one OS call the engine needs, kept here with the crate's other
//! `unsafe` so it is audited in one place.

/// Sets the calling thread's nice value (Linux keeps it per thread; threads spawned later
/// by this one inherit it). Returns whether the kernel accepted it; elsewhere than Linux
/// it does nothing and returns `false`. Raising one's own nice value needs no privilege.
pub fn set_current_thread_nice(nice: i32) -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid and setpriority take plain integers, touch no memory of ours and
        // only change the scheduling priority of the calling thread.
        unsafe {
            let thread = libc::syscall(libc::SYS_gettid);
            match libc::id_t::try_from(thread) {
                Ok(thread) => libc::setpriority(libc::PRIO_PROCESS, thread, nice) == 0,
                Err(_) => false,
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = nice;
        false
    }
}

#[cfg(test)]
mod tests {
    #[test]
    #[cfg(target_os = "linux")]
    fn a_thread_lowers_its_own_priority_and_only_its_own() {
        let nice_of = |thread: i64| -> i64 {
            let stat = std::fs::read_to_string(format!("/proc/self/task/{thread}/stat")).unwrap();
            let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
            fields[16].parse().unwrap()
        };
        // SAFETY: gettid has no preconditions.
        let main = unsafe { libc::syscall(libc::SYS_gettid) };
        let before = nice_of(main);
        let child = std::thread::spawn(move || {
            assert!(super::set_current_thread_nice(10));
            // SAFETY: as above.
            let me = unsafe { libc::syscall(libc::SYS_gettid) };
            nice_of(me)
        })
        .join()
        .unwrap();
        assert_eq!(child, 10);
        assert_eq!(nice_of(main), before);
    }
}
