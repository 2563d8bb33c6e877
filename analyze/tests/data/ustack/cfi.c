/* Functions that call the C library's write, pwrite and fsync directly (no helper), and a
 * two-level chain store_page > flush_page > write: the stacks a frame-pointer walk cannot
 * give whole (the libc wrapper sets up no frame; without frame pointers, nothing does). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char buf[1 << 16];
static volatile unsigned long total;

__attribute__((noinline)) void append_wal(int fd, int n) {
    for (int i = 0; i < n; i++) {
        ssize_t w = write(fd, buf, sizeof buf);
        if (w != (ssize_t)sizeof buf) abort();
        total += w;
    }
}

__attribute__((noinline)) void write_checkpoint(int fd, int n) {
    for (int i = 0; i < n; i++) {
        ssize_t w = pwrite(fd, buf, sizeof buf, (off_t)i * sizeof buf);
        if (w != (ssize_t)sizeof buf) abort();
        total += w;
    }
    if (fsync(fd) != 0) abort();
    total++;
}

__attribute__((noinline)) void flush_page(int fd, const char *p, size_t len) {
    ssize_t w = write(fd, p, len);
    if (w != (ssize_t)len) abort();
    total += w;
}

__attribute__((noinline)) void store_page(int fd, int n) {
    for (int i = 0; i < n; i++) {
        buf[0] = (char)i;
        flush_page(fd, buf, sizeof buf);
        total ^= (unsigned long)buf[1];
    }
}

static int open_file(const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    if (fd < 0) { perror(path); exit(1); }
    return fd;
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: cfi wal|ckpt|page DIR\n"); return 2; }
    memset(buf, 'x', sizeof buf);
    if (!strcmp(argv[1], "wal")) {
        int fd = open_file(argv[2], "wal.dat");
        append_wal(fd, 64); /* 4 MiB */
        close(fd);
    } else if (!strcmp(argv[1], "ckpt")) {
        int fd = open_file(argv[2], "ckpt.dat");
        write_checkpoint(fd, 32); /* 2 MiB, fsync'd */
        close(fd);
    } else if (!strcmp(argv[1], "page")) {
        int fd = open_file(argv[2], "page.dat");
        store_page(fd, 16); /* 1 MiB */
        close(fd);
    } else return 2;
    return total == 0;
}
