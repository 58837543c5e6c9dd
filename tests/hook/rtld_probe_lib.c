/* rtld_probe_lib.c - built three times (-DPROBE_NAME=a, b, local) for
 * rtld_test: each copy defines probe_whoami() and asks the dynamic linker
 * for the "next" and "default" definitions from its own point of view. */
#include <dlfcn.h>
#include <stddef.h>

#define STR2(x) #x
#define STR(x) STR2(x)
#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)

const char *probe_whoami(void)
{
    return STR(PROBE_NAME);
}

typedef const char *(*probe_fn)(void);

static const char *call(void *sym)
{
    return sym ? ((probe_fn)sym)() : "none";
}

/* dlsym(RTLD_NEXT, name) called from this object. */
const char *CAT(PROBE_NAME, _next)(const char *name)
{
    return call(dlsym(RTLD_NEXT, name));
}

/* Whether dlsym(RTLD_NEXT, name) from this object finds anything (for
 * names that are not probes, like libc functions). */
int CAT(PROBE_NAME, _next_found)(const char *name)
{
    return dlsym(RTLD_NEXT, name) != NULL;
}

/* dlsym(RTLD_DEFAULT, name) called from this object. */
const char *CAT(PROBE_NAME, _default)(const char *name)
{
    return call(dlsym(RTLD_DEFAULT, name));
}
