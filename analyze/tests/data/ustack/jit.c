/* A JIT's code writing (x86-64): a function copied into anonymous executable memory does the
 * write system call, named only by the perf map the program writes (/tmp/perf-PID.map), as
 * V8, the JVM (with an agent) and CPython 3.12 (-X perf) do. The user-stack tests check that
 * its IO is named after that map's entry. Usage: jit PATH KIB */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef long (*write_fn)(int, const void *, unsigned long);

/* push rbp; mov rbp, rsp; mov eax, 1 (write); syscall; pop rbp; ret */
static const unsigned char code[] = {0x55, 0x48, 0x89, 0xe5, 0xb8, 0x01, 0x00, 0x00,
                                     0x00, 0x0f, 0x05, 0x5d, 0xc3};
static char buf[65536];

__attribute__((noinline)) static void run(write_fn f, int fd, long bytes) {
    while (bytes > 0) {
        long n = f(fd, buf, sizeof buf);
        if (n <= 0) exit(2);
        bytes -= n;
    }
}

int main(int argc, char **argv) {
    if (argc < 3) return 1;
    unsigned char *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return 3;
    memcpy(m, code, sizeof code);
    char map[64];
    snprintf(map, sizeof map, "/tmp/perf-%d.map", getpid());
    FILE *pm = fopen(map, "w");
    if (!pm) return 4;
    fprintf(pm, "%lx %zx jit_wal_append\n", (unsigned long)m, sizeof code);
    fclose(pm);
    memset(buf, 'j', sizeof buf);
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    run((write_fn)m, fd, atol(argv[2]) * 1024);
    close(fd);
    /* A service's lifetime: alive until the recorder has read its perf map (a flush). */
    if (getenv("USTACK_LINGER_MS")) usleep(atol(getenv("USTACK_LINGER_MS")) * 1000);
    return 0;
}
