/* uuids.c - the fake devices' UUIDs, shared by the fake libcuda and the fake
 * libnvidia-ml so that both name the same GPUs.
 *
 * FAKE_CUDA_DEVICES is a device count ("2") or a comma-separated list of
 * UUIDs as nvidia-smi prints them ("GPU-0a1b...,GPU-..."); default one
 * device, GPU-fa4e0000-0000-0000-0000-00000000000<i>. */
#include <stdlib.h>
#include <string.h>

#include "fake.h"

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* "GPU-xxxxxxxx-xxxx-..." up to a comma or the end; 0 on success. */
static int parse_uuid(const char *text, CUuuid *uuid)
{
    int nibbles = 0;

    if (strncmp(text, "GPU-", 4) == 0)
        text += 4;
    for (; *text && *text != ',' && nibbles < 32; text++) {
        int v = hex_value(*text);

        if (*text == '-')
            continue;
        if (v < 0)
            return -1;
        if (nibbles % 2 == 0)
            uuid->bytes[nibbles / 2] = (char)(v << 4);
        else
            uuid->bytes[nibbles / 2] |= (char)v;
        nibbles++;
    }
    return nibbles == 32 ? 0 : -1;
}

int fake_read_uuids(CUuuid uuids[FAKE_MAX_DEVICES])
{
    const char *spec = getenv("FAKE_CUDA_DEVICES");
    int count = spec ? atoi(spec) : 1;

    if (spec && strchr(spec, '-')) { /* a list of UUIDs */
        count = 0;
        for (const char *p = spec; p && count < FAKE_MAX_DEVICES;
             p = strchr(p, ','), p = p ? p + 1 : NULL)
            if (parse_uuid(p, &uuids[count]) == 0)
                count++;
        return count;
    }
    if (count < 0 || count > FAKE_MAX_DEVICES)
        count = 1;
    for (int i = 0; i < count; i++) {
        memset(&uuids[i], 0, sizeof(uuids[i]));
        uuids[i].bytes[0] = (char)0xfa;
        uuids[i].bytes[1] = 0x4e;
        uuids[i].bytes[15] = (char)i;
    }
    return count;
}
