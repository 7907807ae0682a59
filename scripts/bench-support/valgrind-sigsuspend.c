/*
 * Preloaded into apns-mock when scripts/bench counts its instructions under valgrind.
 *
 * Swift's async main parks the main thread in libdispatch, which calls sigsuspend(2) with a mask
 * that lives in read-only memory. Valgrind 3.19 (Debian 12) rewrites that mask in place before
 * the system call and dies with SIGSEGV. This sigsuspend passes a writable copy instead; the
 * system call and its effect are unchanged. Not used outside the benchmark.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

int sigsuspend(const sigset_t *mask) {
    sigset_t copy = *mask;
    return (int)syscall(SYS_rt_sigsuspend, &copy, (size_t)(_NSIG / 8));
}
