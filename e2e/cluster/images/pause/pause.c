/* The pod sandbox's process (registry.k8s.io/pause:3.10 in Tidegate's one-node cluster).
 *
 * It holds the pod's namespaces open and does nothing else: as PID 1 of the pod's PID
 * namespace (when the pod shares one) it reaps every orphan that is handed to it, and it exits
 * on SIGINT or SIGTERM. Written for the tests, built static into a FROM scratch image. */

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAUSE_VERSION "3.10-tidegate"

static volatile sig_atomic_t stop_signal = 0;

static void on_stop(int sig) { stop_signal = sig; }

/* SIGCHLD's handler reaps every exited child; errno is kept for the interrupted code. */
static void on_child(int sig) {
  (void)sig;
  int saved = errno;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
  errno = saved;
}

static int install(int sig, void (*handler)(int)) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = sig == SIGCHLD ? (SA_NOCLDSTOP | SA_RESTART) : 0;
  return sigaction(sig, &sa, NULL);
}

int main(int argc, char **argv) {
  if (argc > 1 && (strcmp(argv[1], "-v") == 0 || strcmp(argv[1], "--version") == 0)) {
    printf("pause %s\n", PAUSE_VERSION);
    return 0;
  }
  if (getpid() != 1) {
    /* Not an error (tests run it by hand), but the reaping matters only as PID 1. */
    fprintf(stderr, "pause: warning: not PID 1\n");
  }
  if (install(SIGINT, on_stop) != 0 || install(SIGTERM, on_stop) != 0 ||
      install(SIGCHLD, on_child) != 0) {
    perror("pause: sigaction");
    return 1;
  }
  /* Block the signals we handle between the check and the wait, so that one arriving in that
   * window is not lost: sigsuspend() atomically unblocks and waits. */
  sigset_t blocked, waitmask;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGINT);
  sigaddset(&blocked, SIGTERM);
  sigaddset(&blocked, SIGCHLD);
  if (sigprocmask(SIG_BLOCK, &blocked, &waitmask) != 0) {
    perror("pause: sigprocmask");
    return 1;
  }
  sigdelset(&waitmask, SIGINT);
  sigdelset(&waitmask, SIGTERM);
  sigdelset(&waitmask, SIGCHLD);
  while (!stop_signal) {
    sigsuspend(&waitmask);
  }
  fprintf(stderr, "pause: signal %d: exiting\n", (int)stop_signal);
  return 0;
}
