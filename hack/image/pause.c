/* The pod sandbox's process (registry.k8s.io/pause, built by hack/images.py): it holds the pod's
 * namespaces, reaps the zombies of a shared PID namespace and exits 0 on SIGINT or SIGTERM.
 * Built static: gcc -static -Os -s -o pause pause.c */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int signo) {
  (void)signo;
  _exit(0);
}

static void reap(int signo) {
  (void)signo;
  int saved = errno;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
  errno = saved;
}

static int on(int signo, void (*handler)(int)) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = signo == SIGCHLD ? SA_NOCLDSTOP | SA_RESTART : SA_RESTART;
  return sigaction(signo, &action, NULL);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "-v") == 0) {
    puts("pause (opsuite)");
    return 0;
  }
  if (getpid() != 1) {
    fputs("pause: not running as PID 1 (expected inside a pod sandbox)\n", stderr);
  }
  if (on(SIGINT, stop) < 0 || on(SIGTERM, stop) < 0 || on(SIGCHLD, reap) < 0) {
    perror("pause: sigaction");
    return 1;
  }
  for (;;) {
    pause();
  }
}
