/* Disk faults for one process, by LD_PRELOAD (tests/support/diskfault.py builds and drives it).
 *
 * DISKFAULT_CTL names a control file, DISKFAULT_PREFIX a directory: calls on regular files below it
 * fail or slow down as the control file says, one rule a line:
 *     write EIO | write ENOSPC     write, pwrite, writev (and their 64-bit names)
 *     fsync EIO | fsync ENOSPC     fsync, fdatasync
 *     read EIO                     read, pread, sendfile from such a file
 *     fsync_delay_ms 800           each fsync/fdatasync first sleeps that long
 * The file is read again at most every 50 ms, with raw system calls (so never through these
 * wrappers); an empty or missing file means no fault. Sockets and files elsewhere are never touched.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static int fail_write, fail_fsync, fail_read, fsync_delay_ms;
static long long checked_ms = -1000;

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int errno_named(const char *s) { return strncmp(s, "ENOSPC", 6) == 0 ? ENOSPC : EIO; }

static void reload(void) {
    long long now = now_ms();
    if (now - checked_ms < 50) return;
    checked_ms = now;
    const char *path = getenv("DISKFAULT_CTL");
    int w = 0, f = 0, r = 0, d = 0;
    char buf[512];
    long n = -1;
    if (path != NULL) {
        long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            n = syscall(SYS_read, fd, buf, sizeof buf - 1);
            syscall(SYS_close, fd);
        }
    }
    if (n > 0) {
        buf[n] = 0;
        char *save = NULL;
        for (char *line = strtok_r(buf, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
            if (strncmp(line, "write ", 6) == 0) w = errno_named(line + 6);
            else if (strncmp(line, "fsync ", 6) == 0) f = errno_named(line + 6);
            else if (strncmp(line, "read ", 5) == 0) r = errno_named(line + 5);
            else if (strncmp(line, "fsync_delay_ms ", 15) == 0) d = atoi(line + 15);
        }
    }
    fail_write = w, fail_fsync = f, fail_read = r, fsync_delay_ms = d;
}

/* Whether fd is a regular file below DISKFAULT_PREFIX (looked up only while a fault is armed). */
static int targeted(int fd) {
    struct stat st;
    if (syscall(SYS_fstat, fd, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    const char *prefix = getenv("DISKFAULT_PREFIX");
    if (prefix == NULL) return 0;
    char link[64], target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    long n = syscall(SYS_readlinkat, AT_FDCWD, link, target, sizeof target - 1);
    if (n <= 0) return 0;
    target[n] = 0;
    return strncmp(target, prefix, strlen(prefix)) == 0;
}

#define REAL(name) static __typeof__(name) *real; if (!real) real = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)
#define FAIL(kind, fd) do { reload(); if ((kind) != 0 && targeted(fd)) { errno = (kind); return -1; } } while (0)

ssize_t write(int fd, const void *b, size_t n) { REAL(write); FAIL(fail_write, fd); return real(fd, b, n); }
ssize_t pwrite(int fd, const void *b, size_t n, off_t o) { REAL(pwrite); FAIL(fail_write, fd); return real(fd, b, n, o); }
ssize_t pwrite64(int fd, const void *b, size_t n, off_t o) { REAL(pwrite64); FAIL(fail_write, fd); return real(fd, b, n, o); }
ssize_t writev(int fd, const struct iovec *v, int c) { REAL(writev); FAIL(fail_write, fd); return real(fd, v, c); }
ssize_t read(int fd, void *b, size_t n) { REAL(read); FAIL(fail_read, fd); return real(fd, b, n); }
ssize_t pread(int fd, void *b, size_t n, off_t o) { REAL(pread); FAIL(fail_read, fd); return real(fd, b, n, o); }
ssize_t pread64(int fd, void *b, size_t n, off_t o) { REAL(pread64); FAIL(fail_read, fd); return real(fd, b, n, o); }
ssize_t sendfile(int out, int in, off_t *o, size_t n) { REAL(sendfile); FAIL(fail_read, in); return real(out, in, o, n); }
ssize_t sendfile64(int out, int in, off_t *o, size_t n) { REAL(sendfile64); FAIL(fail_read, in); return real(out, in, o, n); }

static void slow(int fd) {
    reload();
    if (fsync_delay_ms > 0 && targeted(fd)) {
        struct timespec ts = {fsync_delay_ms / 1000, (long)(fsync_delay_ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
    }
}

int fsync(int fd) { REAL(fsync); slow(fd); FAIL(fail_fsync, fd); return real(fd); }
int fdatasync(int fd) { REAL(fdatasync); slow(fd); FAIL(fail_fsync, fd); return real(fd); }
