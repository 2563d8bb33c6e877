#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static char buf[65536];
__attribute__((noinline)) static void write_all(int fd, long bytes) {
    while (bytes > 0) { long n = write(fd, buf, bytes < (long)sizeof buf ? bytes : (long)sizeof buf); if (n <= 0) exit(2); bytes -= n; }
}
__attribute__((noinline)) static void sync_fd(int fd) { if (fsync(fd)) exit(3); }
__attribute__((noinline)) static void read_all(int fd) { while (read(fd, buf, sizeof buf) > 0) {} }
__attribute__((noinline)) void wal_append(const char *p, long kib) { int fd = open(p, O_WRONLY|O_CREAT|O_TRUNC, 0644); write_all(fd, kib * 1024); close(fd); }
__attribute__((noinline)) void checkpoint(const char *p, long kib) { int fd = open(p, O_WRONLY|O_CREAT|O_TRUNC, 0644); write_all(fd, kib * 1024); sync_fd(fd); close(fd); }
__attribute__((noinline)) void scan_table(const char *p) { int fd = open(p, O_RDONLY); posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED); read_all(fd); close(fd); }
int main(int argc, char **argv) {
    memset(buf, 'x', sizeof buf);
    if (argc < 3) return 1;
    if (!strcmp(argv[1], "wal")) wal_append(argv[2], atol(argv[3]));
    else if (!strcmp(argv[1], "ckpt")) checkpoint(argv[2], atol(argv[3]));
    else if (!strcmp(argv[1], "scan")) scan_table(argv[2]);
    /* A service's lifetime: alive until the recorder has read its mappings (a flush). */
    if (getenv("USTACK_LINGER_MS")) usleep(atol(getenv("USTACK_LINGER_MS")) * 1000);
    return 0;
}
