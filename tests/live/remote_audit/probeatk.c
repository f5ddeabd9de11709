/* The sandbox attacking audit's status probe, which joins its pid
 * namespace: for SECONDS, watch /proc for any process that is not the
 * sandbox's user's (the probe, and runc setting it up), and on each try
 * to stop it, ptrace it, write a forged answer to its stdout through
 * /proc/PID/fd/1, and open its memory. With `new` after SECONDS (a
 * sandbox running as root, the probe's own uid): every process that was
 * not there when it started. Prints one tally line at the end:
 * `seen=N stopped=N traced=N stdout=N mem=N` (each but seen must stay 0).
 * Static: the fixture has no libc. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <time.h>
#include <unistd.h>

static const char FORGED[] =
    "sbx-audit-probe 1\npid 1\nuid 12345\ncap_eff 0000000000000000\ncap_prm 0000000000000000\n"
    "cap_bnd 0000000000000000\nno_new_privs 1\nseccomp 2\nprogram forged\nend\n";

/* The real uid /proc/PID/status shows, or -1. */
static long uid_of(const char *pid) {
    char p[64], buf[4096];
    snprintf(p, sizeof p, "/proc/%s/status", pid);
    int fd = open(p, O_RDONLY);
    if (fd < 0) return -1;
    ssize_t r = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (r <= 0) return -1;
    buf[r] = 0;
    char *u = strstr(buf, "\nUid:\t");
    return u ? strtol(u + 6, 0, 10) : -1;
}

int main(int argc, char **argv) {
    int seconds = argc > 1 ? atoi(argv[1]) : 20;
    int fresh = argc > 2 && !strcmp(argv[2], "new");
    long me = (long)getuid();
    int seen = 0, stopped = 0, traced = 0, wrote = 0, mem = 0;
    int done[4096];
    int ndone = 0;
    if (fresh) {
        DIR *d = opendir("/proc");
        struct dirent *e;
        while (d && (e = readdir(d)) && ndone < 4096)
            if (e->d_name[0] >= '0' && e->d_name[0] <= '9') done[ndone++] = atoi(e->d_name);
        if (d) closedir(d);
    }
    time_t end = time(0) + seconds;
    while (time(0) < end) {
        DIR *d = opendir("/proc");
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
            int pid = atoi(e->d_name);
            int known = 0;
            for (int i = 0; i < ndone; i++) known |= done[i] == pid;
            if (known) continue;
            long uid = uid_of(e->d_name);
            if (uid < 0 || (!fresh && uid == me)) continue;
            if (ndone < 4096) done[ndone++] = pid;
            seen++;
            if (kill(pid, SIGSTOP) == 0) { stopped++; kill(pid, SIGCONT); }
            if (ptrace(PTRACE_SEIZE, pid, 0, 0) == 0) { traced++; ptrace(PTRACE_DETACH, pid, 0, 0); }
            char p[64];
            snprintf(p, sizeof p, "/proc/%d/fd/1", pid);
            int fd = open(p, O_WRONLY);
            if (fd >= 0) { if (write(fd, FORGED, sizeof FORGED - 1) > 0) wrote++; close(fd); }
            snprintf(p, sizeof p, "/proc/%d/mem", pid);
            fd = open(p, O_RDWR);
            if (fd >= 0) { mem++; close(fd); }
        }
        if (d) closedir(d);
    }
    printf("seen=%d stopped=%d traced=%d stdout=%d mem=%d\n", seen, stopped, traced, wrote, mem);
    return 0;
}
