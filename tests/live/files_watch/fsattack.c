/* The sandbox side of the files/watch tests: names built to break a
 * listing (forged lines, terminal escapes, bytes that are not UTF-8, the
 * longest name and link target), every file type, change sequences and a
 * flood of files. Static, so it runs in the fixture image (no libc there). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <dirent.h>

static void touch(const char *p, const char *data) {
    int fd = open(p, O_CREAT | O_WRONLY | O_APPEND, 0644);
    if (fd < 0) { perror(p); exit(1); }
    if (data && write(fd, data, strlen(data)) < 0) { perror(p); exit(1); }
    close(fd);
}

static void pause_ms(int ms) { usleep(ms * 1000); }

int main(int argc, char **argv) {
    if (argc < 3) return 64;
    const char *mode = argv[1];
    if (chdir(argv[2]) != 0) { perror(argv[2]); return 1; }
    if (!strcmp(mode, "tree")) {
        /* Every type, links pointing out (never followed), a tree to recurse. */
        touch("file", "hello");
        chmod("file", 04750);
        mkfifo("fifo", 0600);
        int s = socket(AF_UNIX, SOCK_STREAM, 0);
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        strcpy(a.sun_path, "sock");
        if (bind(s, (struct sockaddr *)&a, sizeof a) != 0) { perror("bind"); return 1; }
        symlink("/etc", "to-etc");
        symlink("/home/operator/.ssh/id_rsa", "to-host");
        symlink("/", "to-root");
        mkdir("d1", 0755); mkdir("d1/d2", 0755); mkdir("d1/d2/d3", 0755); mkdir("d1/d2/d3/d4", 0755);
        touch("d1/d2/d3/d4/leaf", NULL);
        symlink("/etc", "d1/etc-link");
        return 0;
    }
    if (!strcmp(mode, "hostile")) {
        touch("innocent\n-rw-r--r-- 0644            1 1970-01-01T00:00:00Z shadow", NULL);
        touch("\x1b[31mred\x1b]0;pwned\x07", NULL);
        touch("bad\xff\xfe", NULL);
        char big[256];
        memset(big, 'N', 255);
        big[255] = 0;
        touch(big, NULL);
        char target[4096];
        memset(target, 'T', 4095);
        memcpy(target, "/etc/\n\x1b[2J", 10);
        target[4095] = 0;
        if (symlink(target, "giant-link") != 0) { perror("symlink"); return 1; }
        return 0;
    }
    if (!strcmp(mode, "seq")) {
        /* created, modified, moved, deleted; a directory made after the
         * watch started and filled at once (the scan on creation finds it). */
        touch("a", "one");
        pause_ms(200);
        touch("a", "two");
        pause_ms(200);
        rename("a", "b");
        pause_ms(200);
        unlink("b");
        pause_ms(200);
        mkdir("sub", 0755);
        touch("sub/early", NULL);
        pause_ms(300);
        touch("sub/c", "x");
        pause_ms(200);
        rename("sub/c", "sub/d");
        pause_ms(200);
        touch("\nforged", NULL);
        return 0;
    }
    if (!strcmp(mode, "flood")) {
        int n = argc > 3 ? atoi(argv[3]) : 50000;
        char name[160];
        for (int i = 0; i < n; i++) {
            snprintf(name, sizeof name, "flood-%08d-%0120d", i, 0);
            int fd = open(name, O_CREAT | O_WRONLY, 0644);
            if (fd < 0) { perror(name); return 1; }
            close(fd);
        }
        printf("made %d\n", n);
        return 0;
    }
    if (!strcmp(mode, "count-procs")) {
        /* Processes whose command line holds argv[3], seen from inside
         * (docker top shows the host's view, which gVisor hides). */
        DIR *d = opendir("/proc");
        struct dirent *e;
        int n = 0;
        while (d && (e = readdir(d))) {
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
            if (strstr(buf, argv[3])) n++;
        }
        printf("%d\n", n);
        return 0;
    }
    return 64;
}
