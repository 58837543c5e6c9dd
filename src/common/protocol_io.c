/* protocol_io.c - moving frames over sockets: blocking send and receive for
 * threads that own their socket, and the frame reader the event loop feeds
 * from non-blocking ones. The bytes themselves are protocol.c's. */
#include "protocol.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

static int send_all(int fd, const uint8_t *buf, size_t len);

/* Lock messages are sent from application threads, whose stacks may be
 * small: frames are encoded on a small stack buffer and only the rare large
 * one (registration, status records) goes to the heap. */
int msg_send(int fd, const struct msg *m)
{
    uint8_t small[512];
    int len = msg_encode(m, small, sizeof(small));

    if (len != PROTO_E_SPACE)
        return len < 0 ? len : send_all(fd, small, (size_t)len);
    uint8_t *big = malloc(PROTO_MAX_FRAME + 4);
    if (!big)
        return PROTO_E_SPACE;
    len = msg_encode(m, big, PROTO_MAX_FRAME + 4);
    int rc = len < 0 ? len : send_all(fd, big, (size_t)len);
    free(big);
    return rc;
}

static int send_all(int fd, const uint8_t *buf, size_t len)
{
    size_t off = 0;

    while (off < len) {
        ssize_t n = send(fd, buf + off, len - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            if (poll(&p, 1, 1000) <= 0)
                return PROTO_E_IO;
            continue;
        }
        if (n <= 0)
            return PROTO_E_IO;
        off += (size_t)n;
    }
    return PROTO_OK;
}

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads exactly n bytes before the deadline (-1: none). */
static int recv_exact(int fd, uint8_t *dst, size_t n, int64_t deadline)
{
    size_t off = 0;

    while (off < n) {
        int wait = -1;
        if (deadline >= 0) {
            int64_t left = deadline - now_ms();
            wait = left > 0 ? (int)left : 0; /* 0: take what is queued */
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int rc = poll(&p, 1, wait);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc == 0)
            return PROTO_E_TIMEOUT;
        if (rc < 0)
            return PROTO_E_IO;
        ssize_t got = recv(fd, dst + off, n - off, 0);
        if (got < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (got <= 0)
            return PROTO_E_IO;
        off += (size_t)got;
    }
    return PROTO_OK;
}

int msg_recv(int fd, struct msg *out, int timeout_ms)
{
    uint8_t header[4], *body;
    int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
    uint32_t len = 0;
    int rc;

    rc = recv_exact(fd, header, 4, deadline);
    if (rc)
        return rc;
    for (int i = 0; i < 4; i++)
        len |= (uint32_t)header[i] << (8 * i);
    if (len > PROTO_MAX_FRAME)
        return PROTO_E_SPACE;
    body = malloc(len ? len : 1);
    if (!body)
        return PROTO_E_SPACE;
    rc = recv_exact(fd, body, len, deadline);
    if (rc == 0)
        rc = msg_decode(body, len, out);
    free(body);
    return rc;
}

int frame_reader_fill(struct frame_reader *r, int fd)
{
    for (;;) {
        ssize_t n =
            recv(fd, r->buf + r->len, sizeof(r->buf) - r->len, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (n <= 0)
            return PROTO_E_IO;
        r->len += (size_t)n;
        return 1;
    }
}

int frame_reader_next(struct frame_reader *r, struct msg *out)
{
    uint32_t len = 0;
    int rc;

    if (r->len < 4)
        return 0;
    for (int i = 0; i < 4; i++)
        len |= (uint32_t)r->buf[i] << (8 * i);
    if (len > PROTO_MAX_FRAME)
        return PROTO_E_SPACE;
    if (r->len < 4 + (size_t)len)
        return 0;
    rc = msg_decode(r->buf + 4, len, out);
    r->len -= 4 + (size_t)len;
    memmove(r->buf, r->buf + 4 + len, r->len);
    return rc ? rc : 1;
}
