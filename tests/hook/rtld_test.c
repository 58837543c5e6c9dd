/* rtld_test.c - dlsym(RTLD_NEXT / RTLD_DEFAULT) from other objects resolves
 * as it does without libnvshare.
 *
 * Linked to probe a then probe b (both define probe_whoami); dlopens the
 * "local" probe (argv[1]) RTLD_LOCAL, whose dependency defines dep_only:
 * from the local probe that name is visible, from elsewhere it is not, and
 * the local probe itself is nobody's "next".
 * Prints one line per lookup and checks it against what glibc answers
 * without any interposer; rtld_test.sh also compares the two runs. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

const char *probe_whoami(void);
const char *a_next(const char *name);
const char *a_default(const char *name);
const char *b_next(const char *name);
const char *b_default(const char *name);

typedef const char *(*lookup_fn)(const char *);

static int failures;

static void expect(const char *what, const char *got, const char *want)
{
    printf("%s = %s\n", what, got);
    if (strcmp(got, want) != 0) {
        printf("FAIL: %s: want %s\n", what, want);
        failures++;
    }
}

static const char *call(void *sym)
{
    return sym ? ((const char *(*)(void))sym)() : "none";
}

int main(int argc, char **argv)
{
    void *local;

    if (argc != 2 || (local = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL)) == NULL) {
        printf("usage: rtld_test /path/librtld_probe_local.so (%s)\n", dlerror());
        return 2;
    }
    lookup_fn local_next = (lookup_fn)dlsym(local, "local_next");
    lookup_fn local_default = (lookup_fn)dlsym(local, "local_default");
    int (*local_next_found)(const char *) =
        (int (*)(const char *))dlsym(local, "local_next_found");

    expect("main next probe_whoami", call(dlsym(RTLD_NEXT, "probe_whoami")), "a");
    expect("main default probe_whoami",
           call(dlsym(RTLD_DEFAULT, "probe_whoami")), "a");
    expect("a next probe_whoami", a_next("probe_whoami"), "b");
    expect("b next probe_whoami", b_next("probe_whoami"), "none");
    dlerror();
    b_next("probe_whoami");
    expect("b next missing sets dlerror", dlerror() ? "yes" : "no", "yes");
    expect("a default probe_whoami", a_default("probe_whoami"), "a");
    expect("main default dep_only", call(dlsym(RTLD_DEFAULT, "dep_only")),
           "none");
    expect("local default dep_only", local_default("dep_only"), "dep");
    expect("local default probe_whoami", local_default("probe_whoami"), "a");
    expect("local next dep_only", local_next("dep_only"), "dep");
    expect("local next probe_whoami", local_next("probe_whoami"), "none");
    expect("local next getpid", local_next_found("getpid") ? "found" : "none",
           "found");
    return failures ? 1 : 0;
}
