/* Attacker program for tests/hostile.rs: run inside a sandbox, it tries
 * every way to move or replace sbx's helper at /run/sbx/helper. Prints
 * one line per attempt; exits 0 only if all failed. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <dirent.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

static int replaced = 0;

static void report(const char *what, int rc) {
    if (rc == 0) {
        printf("REPLACED %s\n", what);
        replaced = 1;
    } else {
        printf("refused %s: %s\n", what, strerror(errno));
    }
}

/* `attack fill`: try to fill the host through /run/sandbox. */
static int fill(void) {
    static char buf[1 << 20];
    memset(buf, 'x', sizeof buf);
    int fd = open("/run/sandbox/big", O_WRONLY | O_CREAT | O_TRUNC, 0600);
    long written = 0;
    int bounded = 0;
    while (fd >= 0 && written < 64L << 20) {
        ssize_t n = write(fd, buf, sizeof buf);
        if (n <= 0) { bounded = errno == ENOSPC; break; }
        written += n;
    }
    printf("wrote %ld bytes: %s\n", written, bounded ? "ENOSPC" : strerror(errno));
    if (fd >= 0) close(fd);
    unlink("/run/sandbox/big");
    int files = 0, fbounded = 0;
    char name[64];
    for (; files < 20000; files++) {
        snprintf(name, sizeof name, "/run/sandbox/f%d", files);
        int f = open(name, O_WRONLY | O_CREAT, 0600);
        if (f < 0) { fbounded = errno == ENOSPC; break; }
        close(f);
    }
    printf("made %d files: %s\n", files, fbounded ? "ENOSPC" : strerror(errno));
    return bounded && fbounded ? 0 : 1;
}

/* `attack ptrace`: attach to every running sbx helper (same uid as us) and
 * report; a traced helper's output is the attacker's to write. */
static int trace_helpers(void) {
    DIR *d = opendir("/proc");
    struct dirent *e;
    int found = 0, attached = 0;
    while (d && (e = readdir(d))) {
        int pid = atoi(e->d_name);
        if (pid <= 0 || pid == getpid()) continue;
        char path[64], cmd[256] = {0};
        snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
        int fd = open(path, O_RDONLY);
        if (fd < 0) continue;
        ssize_t n = read(fd, cmd, sizeof cmd - 1);
        close(fd);
        if (n <= 0 || strcmp(cmd, "/run/sbx/helper") != 0) continue;
        found++;
        if (ptrace(PTRACE_ATTACH, pid, 0, 0) == 0) {
            waitpid(pid, 0, 0);
            printf("ATTACHED to helper %d\n", pid);
            ptrace(PTRACE_DETACH, pid, 0, 0);
            attached++;
        } else {
            printf("refused ptrace of helper %d: %s\n", pid, strerror(errno));
        }
    }
    if (d) closedir(d);
    printf("%d helpers found\n", found);
    return found > 0 && attached == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "fill") == 0) return fill();
    if (argc > 1 && strcmp(argv[1], "ptrace") == 0) return trace_helpers();
    mkdir("/tmp/x", 0755);
    int fd = open("/tmp/x/helper", O_WRONLY | O_CREAT, 0755);
    if (fd >= 0) close(fd);
    report("rename /run/sbx", rename("/run/sbx", "/tmp/o"));
    report("rename /run", rename("/run", "/tmp/r"));
    report("rename over /run/sbx", rename("/tmp/x", "/run/sbx"));
    report("exchange /run/sbx",
           (int)syscall(SYS_renameat2, AT_FDCWD, "/tmp/x", AT_FDCWD, "/run/sbx", RENAME_EXCHANGE));
    report("exchange /run/sbx/helper",
           (int)syscall(SYS_renameat2, AT_FDCWD, "/tmp/x/helper", AT_FDCWD, "/run/sbx/helper", RENAME_EXCHANGE));
    report("rmdir /run/sbx", rmdir("/run/sbx"));
    report("symlink at /run/sbx", symlink("/tmp/x", "/run/sbx"));
    report("mkdir /run/sbx", mkdir("/run/sbx", 0755));
    report("unlink /run/sbx/helper", unlink("/run/sbx/helper"));
    report("rename over /run/sbx/helper", rename("/tmp/x/helper", "/run/sbx/helper"));
    report("create /run/sbx/evil", (fd = open("/run/sbx/evil", O_WRONLY | O_CREAT, 0755)) >= 0 ? 0 : -1);
    report("write /run/sbx/helper", (fd = open("/run/sbx/helper", O_WRONLY)) >= 0 ? 0 : -1);
    report("chmod /run/sbx", chmod("/run/sbx", 0777));
    return replaced;
}
