/* rtld_probe_dep.c - a dependency of the RTLD_LOCAL probe only: its symbol
 * is visible from that probe's local scope, not from the global one. */
const char *dep_only(void)
{
    return "dep";
}
