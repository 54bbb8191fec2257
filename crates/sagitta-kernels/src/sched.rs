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

/// The most CPU numbers the affinity calls below take (glibc's `CPU_SETSIZE`).
pub const MAX_CPUS: usize = 1024;

/// The CPUs the calling thread may run on (its affinity mask: a cpuset cgroup, `taskset`
/// or a scheduler's binding narrow it), ascending. `None` where the kernel does not say
/// (not Linux, or the call failed): the caller then assumes every online CPU.
pub fn allowed_cpus() -> Option<Vec<usize>> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity writes at most
        // size_of::<cpu_set_t>() bytes into it; CPU_ISSET reads bit `cpu` < CPU_SETSIZE.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
                return None;
            }
            Some(
                (0..MAX_CPUS)
                    .filter(|&cpu| libc::CPU_ISSET(cpu, &set))
                    .collect(),
            )
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// Binds the calling thread to `cpus` (threads it spawns later inherit the binding).
/// Returns whether the kernel accepted it: `false` for an empty list, numbers of
/// [`MAX_CPUS`] or more, CPUs outside the process's cpuset, and elsewhere than Linux.
pub fn pin_current_thread(cpus: &[usize]) -> bool {
    if cpus.is_empty() || cpus.iter().any(|&cpu| cpu >= MAX_CPUS) {
        return false;
    }
    #[cfg(target_os = "linux")]
    {
        // SAFETY: as in `allowed_cpus`; CPU_SET writes bit `cpu` < CPU_SETSIZE (checked
        // above); sched_setaffinity reads the set and changes only this thread's mask.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            for &cpu in cpus {
                libc::CPU_SET(cpu, &mut set);
            }
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    #[test]
    #[cfg(target_os = "linux")]
    fn a_pinned_thread_reports_its_binding_and_the_spawner_keeps_its_own() {
        let before = super::allowed_cpus().expect("linux reports affinity");
        assert!(!before.is_empty());
        let first = before[0];
        let inside = std::thread::spawn(move || {
            assert!(super::pin_current_thread(&[first]));
            super::allowed_cpus()
        })
        .join()
        .unwrap();
        assert_eq!(inside, Some(vec![first]));
        assert_eq!(super::allowed_cpus(), Some(before));
        assert!(!super::pin_current_thread(&[]));
        assert!(!super::pin_current_thread(&[super::MAX_CPUS]));
    }

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
