/* The victim of the blame tests (analyze/tests/blame_live.rs): O_DIRECT reads of 4 KiB, one
 * at a time, walking FILE, until the file STOP exists or SECONDS have passed. Its command
 * name is its file name (the test builds it as victimR). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s FILE STOP SECONDS\n", argv[0]);
        return 2;
    }
    int fd = open(argv[1], O_RDONLY | O_DIRECT);
    if (fd < 0) {
        perror(argv[1]);
        return 1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < 4096) {
        fprintf(stderr, "%s: too small\n", argv[1]);
        return 1;
    }
    void *buf;
    if (posix_memalign(&buf, 4096, 4096) != 0)
        return 1;
    long blocks = st.st_size / 4096, n = 0;
    time_t end = time(NULL) + atoi(argv[3]);
    /* A stride that walks every block before coming back (blocks is a power of two). */
    while (time(NULL) < end) {
        off_t off = (off_t)((n * 2654435761u) % (unsigned long)blocks) * 4096;
        if (pread(fd, buf, 4096, off) != 4096) {
            perror("pread");
            return 1;
        }
        n++;
        if ((n & 15) == 0 && access(argv[2], F_OK) == 0)
            break;
    }
    printf("%ld reads\n", n);
    return 0;
}
