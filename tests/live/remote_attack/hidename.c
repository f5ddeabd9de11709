/* The sandbox's main program (pid 1) hiding its status from audit: it
 * names itself with bytes that are not UTF-8 (prctl PR_SET_NAME, which
 * /proc/1/status prints as they are), then runs the fixture's `serve` as a
 * child (so the sandbox answers) and reaps children for ever.
 * Static: the image has no libc. */
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void) {
    prctl(PR_SET_NAME, "\xff\xfe\xfd", 0, 0, 0);
    pid_t child = fork();
    if (child == 0) {
        char *argv[] = {"fixture", "serve", 0};
        execv("/bin/fixture", argv);
        _exit(127);
    }
    for (;;) {
        if (wait(0) < 0) pause();
    }
}
