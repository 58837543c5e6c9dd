/* sock.c - see sock.h. */
#include "sock.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static int make_addr(const char *path, struct sockaddr_un *addr)
{
    memset(addr, 0, sizeof(*addr));
    addr->sun_family = AF_UNIX;
    if (strlen(path) >= sizeof(addr->sun_path)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(addr->sun_path, path);
    return 0;
}

int unix_connect(const char *path)
{
    struct sockaddr_un addr;
    int fd;

    if (make_addr(path, &addr))
        return -1;
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int unix_listen(const char *path, mode_t mode)
{
    struct sockaddr_un addr;
    int fd;

    if (make_addr(path, &addr))
        return -1;
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    /* A socket file left by a scheduler that died is not in use: the
     * caller holds the pid lock that says no other scheduler runs. */
    unlink(path);
    if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
        chmod(path, mode) < 0 || listen(fd, 128) < 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

static int spare_fd = -1;

int unix_keep_spare(void)
{
    if (spare_fd < 0)
        spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    return spare_fd < 0 ? -1 : 0;
}

int unix_accept(int listen_fd)
{
    int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

    if (fd >= 0 || (errno != EMFILE && errno != ENFILE) || spare_fd < 0)
        return fd;
    close(spare_fd);
    fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd >= 0)
        close(fd);
    spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    errno = EMFILE;
    return -1;
}

int unix_peer(int fd, pid_t *pid, uid_t *uid)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);

    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
        return -1;
    *pid = cred.pid;
    *uid = cred.uid;
    return 0;
}
