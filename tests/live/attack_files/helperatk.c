/* The sandbox attacking sbx's helper while it lists or watches: find the
 * helper's processes (by their command line, which /proc shows anyone),
 * stop them, try to ptrace them or write to their stdout through /proc,
 * and build trees deeper than any path; and what it leaves for `cp` and
 * `backup` to carry out: setuid modes, fifos, sockets, names that are not
 * UTF-8. Static: the fixture has no libc. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Pids (not ours) whose command line holds `pat`; at most `max`. */
static int helpers(const char *pat, int *pids, int max) {
    DIR *d = opendir("/proc");
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)) && n < max) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9' || atoi(e->d_name) == getpid()) continue;
        char p[64], buf[4096];
        snprintf(p, sizeof p, "/proc/%s/cmdline", e->d_name);
        int fd = open(p, O_RDONLY);
        if (fd < 0) continue;
        ssize_t r = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (r <= 0) continue;
        for (ssize_t i = 0; i < r; i++) if (!buf[i]) buf[i] = ' ';
        buf[r] = 0;
        /* Never our own kind (their argv names the pattern too, and so does the supervisor of `sbx exec -d`). */
        if (strstr(buf, pat) && !strstr(buf, "/tmp/atk")) pids[n++] = atoi(e->d_name);
    }
    if (d) closedir(d);
    return n;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc < 2) return 64;
    const char *mode = argv[1];
    if (!strcmp(mode, "stopper") && argc > 3) {
        /* In the background for argv[3] seconds: SIGSTOP every helper
         * process running argv[2] as soon as it appears. */
        double until = now() + atof(argv[3]);
        int fd = open("/dev/null", O_RDWR);
        dup2(fd, 0); dup2(fd, 1); dup2(fd, 2);
        while (now() < until) {
            int pids[64];
            int n = helpers(argv[2], pids, 64);
            for (int i = 0; i < n; i++) kill(pids[i], SIGSTOP);
            usleep(2000);
        }
        return 0;
    }
    if (!strcmp(mode, "probe") && argc > 2) {
        /* What the sandbox can do to a running helper: ptrace it, open its
         * stdout (/proc/PID/fd/1) or memory. Prints one word per attempt. */
        int pids[8];
        int n = 0;
        for (int i = 0; i < 500 && n == 0; i++) { n = helpers(argv[2], pids, 8); if (!n) usleep(10000); }
        if (n == 0) { printf("nohelper\n"); return 1; }
        int pid = pids[0];
        long r = ptrace(PTRACE_SEIZE, pid, 0, 0);
        printf("ptrace=%s\n", r == 0 ? "attached" : strerror(errno));
        if (r == 0) ptrace(PTRACE_DETACH, pid, 0, 0);
        char p[64];
        snprintf(p, sizeof p, "/proc/%d/fd/1", pid);
        int fd = open(p, O_WRONLY);
        if (fd >= 0) {
            const char *forged = "EV created f 666f72676564\n"; /* "forged" */
            ssize_t w = write(fd, forged, strlen(forged));
            printf("stdout=%s\n", w > 0 ? "written" : strerror(errno));
        } else {
            printf("stdout=%s\n", strerror(errno));
        }
        snprintf(p, sizeof p, "/proc/%d/mem", pid);
        fd = open(p, O_RDWR);
        printf("mem=%s\n", fd >= 0 ? "opened" : strerror(errno));
        return 0;
    }
    if (!strcmp(mode, "many") && argc > 3) {
        /* argv[3] empty files in argv[2]: a listing that takes a while. */
        if (chdir(argv[2]) != 0) { perror(argv[2]); return 1; }
        char name[64];
        for (int i = 0; i < atoi(argv[3]); i++) {
            snprintf(name, sizeof name, "f%08d", i);
            int fd = open(name, O_CREAT | O_WRONLY, 0644);
            if (fd < 0) { perror(name); return 1; }
            close(fd);
        }
        return 0;
    }
    if (!strcmp(mode, "count") && argc > 2) {
        int pids[64];
        printf("%d\n", helpers(argv[2], pids, 64));
        return 0;
    }
    if (!strcmp(mode, "deep") && argc > 3) {
        /* argv[3] nested directories below argv[2], made with *at calls so
         * the path may grow past PATH_MAX. */
        int n = atoi(argv[3]);
        int dir = open(argv[2], O_DIRECTORY | O_RDONLY);
        for (int i = 0; i < n; i++) {
            if (mkdirat(dir, "d", 0755) != 0 && errno != EEXIST) { perror("mkdirat"); return 1; }
            int next = openat(dir, "d", O_DIRECTORY | O_RDONLY);
            if (next < 0) { perror("openat"); return 1; }
            close(dir);
            dir = next;
        }
        return 0;
    }
    if (!strcmp(mode, "chmod") && argc > 3) {
        /* chmod OCTAL PATH: what the sandbox's user may do to its own files. */
        if (chmod(argv[3], strtol(argv[2], 0, 8)) != 0) { perror(argv[3]); return 1; }
        return 0;
    }
    if (!strcmp(mode, "fifo") && argc > 2) {
        if (mkfifo(argv[2], 0644) != 0) { perror(argv[2]); return 1; }
        return 0;
    }
    if (!strcmp(mode, "sock") && argc > 2) {
        /* A unix socket bound at argv[2] and left behind. */
        struct sockaddr_un a = { .sun_family = AF_UNIX };
        strncpy(a.sun_path, argv[2], sizeof a.sun_path - 1);
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0) { perror(argv[2]); return 1; }
        return 0;
    }
    if (!strcmp(mode, "badname") && argc > 2) {
        /* A file in argv[2] whose name is not UTF-8 ("bad\xff\xfe.txt"). */
        if (chdir(argv[2]) != 0) { perror(argv[2]); return 1; }
        int fd = open("bad\xff\xfe.txt", O_CREAT | O_WRONLY | O_TRUNC, 0644);
        if (fd < 0 || write(fd, "hidden\n", 7) != 7) { perror("badname"); return 1; }
        close(fd);
        return 0;
    }
    return 64;
}
