/* cli-profile-hosts.c — ranks on other hosts: the address they push to
 * (--listen's), whether a command may start them (mpirun, srun, several
 * nodes), and the variables mpirun must forward to them. */
#include "cli-profile-private.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* "HOST:PORT" (HOST may be "[v6]" or empty) into its host. */
void
listen_host (const char *spec, char *host, size_t size)
{
  const char *colon = strrchr (spec, ':');
  size_t n = colon ? (size_t) (colon - spec) : strlen (spec);
  if (n >= 2 && spec[0] == '[' && spec[n - 1] == ']')
    {
      spec++;
      n -= 2;
    }
  snprintf (host, size, "%.*s", (int) n, spec);
}

static bool
is_loopback (const struct sockaddr *sa)
{
  if (sa->sa_family == AF_INET)
    return (ntohl (((const struct sockaddr_in *) sa)->sin_addr.s_addr) >> 24) == 127;
  if (sa->sa_family == AF_INET6)
    return IN6_IS_ADDR_LOOPBACK (&((const struct sockaddr_in6 *) sa)->sin6_addr);
  return true;
}

/* Whether host names an address of another host's reach: some address it
 * resolves to is not loopback (a name that does not resolve: no). */
static bool
reachable_name (const char *host)
{
  struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
  struct addrinfo *res = NULL;
  bool ok = false;
  if (getaddrinfo (host, NULL, &hints, &res) != 0)
    return false;
  for (struct addrinfo *ai = res; ai && !ok; ai = ai->ai_next)
    ok = !is_loopback (ai->ai_addr);
  freeaddrinfo (res);
  return ok;
}

/* Where ranks on other hosts push to: --listen's host with the port it
 * got; for a wildcard (0.0.0.0, ::, none) this host's name where it
 * resolves to an address that is not loopback (Debian maps it to
 * 127.0.1.1), else the first such address of an interface.  "" when the
 * collector listens on loopback only. */
void
collect_address (const char *listen, int port, char *out, size_t size)
{
  char host[256] = "", name[256] = "";

  out[0] = '\0';
  if (listen == NULL || port <= 0)
    return;
  listen_host (listen, host, sizeof host);
  if (host[0] && strcmp (host, "0.0.0.0") != 0 && strcmp (host, "::") != 0)
    {
      if (reachable_name (host))
        snprintf (out, size, strchr (host, ':') ? "[%s]:%d" : "%s:%d", host, port);
      return;
    }
  if (gethostname (name, sizeof name - 1) == 0 && reachable_name (name))
    {
      snprintf (out, size, "%s:%d", name, port);
      return;
    }
  struct ifaddrs *ifs = NULL;
  if (getifaddrs (&ifs) != 0)
    return;
  for (struct ifaddrs *i = ifs; i && !out[0]; i = i->ifa_next)
    if (i->ifa_addr && (i->ifa_addr->sa_family == AF_INET || (i->ifa_addr->sa_family == AF_INET6 && strcmp (host, "::") == 0))
        && !is_loopback (i->ifa_addr)
        && getnameinfo (i->ifa_addr, i->ifa_addr->sa_family == AF_INET ? sizeof (struct sockaddr_in)
                                                                        : sizeof (struct sockaddr_in6),
                        name, sizeof name, NULL, 0, NI_NUMERICHOST) == 0
        && !(i->ifa_addr->sa_family == AF_INET6 && strchr (name, '%')))
      snprintf (out, size, strchr (name, ':') ? "[%s]:%d" : "%s:%d", name, port);
  freeifaddrs (ifs);
}

static bool
is_mpirun (const char *arg0)
{
  const char *base = strrchr (arg0, '/');
  base = base ? base + 1 : arg0;
  return strcmp (base, "mpirun") == 0 || strcmp (base, "mpiexec") == 0 || strcmp (base, "orterun") == 0;
}

/* A command that may start ranks on other hosts: mpirun, srun, or a
 * launcher told of several nodes. */
bool
spans_hosts (int argc, char **argv)
{
  const char *base = strrchr (argv[0], '/');
  base = base ? base + 1 : argv[0];
  if (is_mpirun (argv[0]) || strcmp (base, "srun") == 0)
    return true;
  for (int i = 1; i < argc; i++)
    if (strncmp (argv[i], "--nnodes", 8) == 0)
      return true;
  return false;
}

/* The variables a rank on another host needs, those that are set. */
static const char *const forwarded[] = {
  "PYTHONPATH", "PIPESCOPE_JOB", "PIPESCOPE_LIB", "PIPESCOPE_PYTHON", "PIPESCOPE_TRACE",
  "PIPESCOPE_JOB_ID", "PIPESCOPE_COLLECT", "PIPESCOPE_COLLECT_TOKEN", "NCCL_PROFILER_PLUGIN",
};

static void
forwarded_list (char *out, size_t size)
{
  size_t len = 0;
  out[0] = '\0';
  for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
    if (getenv (forwarded[i]) != NULL && len < size)
      len += (size_t) snprintf (out + len, size - len, "%s%s", len ? ";" : "", forwarded[i]);
}

/* mpirun starts the ranks of other hosts through their own daemon, which
 * gets none of our environment but what it is told to forward: the names
 * go into mca_base_env_list (values are taken from here, sent with the
 * launch, never on a command line; checked on OpenMPI 4.1).  OpenMPI
 * refuses a job that gives both -x and that list, so with -x they go as -x
 * NAME; with the list on the command line (--mca mca_base_env_list V),
 * which wins over the variable, into V; else into the variable, after
 * what the user had.  Returns the command's argv (new, or argv itself);
 * NULL when out of memory. */
char **
forward_env (int argc, char **argv, char **extra_value)
{
  char names[512], value[4096];
  int xi = -1, li = -1;

  *extra_value = NULL;
  if (!is_mpirun (argv[0]))
    return argv;
  forwarded_list (names, sizeof names);
  for (int i = 1; i < argc; i++)
    {
      if (strcmp (argv[i], "-x") == 0 && xi < 0)
        xi = i;
      if ((strcmp (argv[i], "--mca") == 0 || strcmp (argv[i], "-mca") == 0 || strcmp (argv[i], "--gmca") == 0
           || strcmp (argv[i], "-gmca") == 0)
          && i + 2 < argc && strcmp (argv[i + 1], "mca_base_env_list") == 0)
        li = i + 2;
    }
  if (xi < 0 && li < 0)
    {
      const char *old = getenv ("OMPI_MCA_mca_base_env_list");
      snprintf (value, sizeof value, "%s%s%s", old && old[0] ? old : "", old && old[0] ? ";" : "", names);
      setenv ("OMPI_MCA_mca_base_env_list", value, 1);
      return argv;
    }
  size_t n_names = 0;
  for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
    n_names += getenv (forwarded[i]) != NULL;
  char **nv = calloc ((size_t) argc + 2 * n_names + 1, sizeof *nv);
  if (nv == NULL)
    return NULL;
  int k = 0;
  nv[k++] = argv[0];
  if (xi >= 0)
    for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
      if (getenv (forwarded[i]) != NULL)
        {
          nv[k++] = "-x";
          nv[k++] = (char *) forwarded[i];
        }
  for (int i = 1; i < argc; i++)
    nv[k++] = argv[i];
  if (xi < 0)
    {
      snprintf (value, sizeof value, "%s;%s", argv[li], names);
      *extra_value = strdup (value);
      if (*extra_value == NULL)
        {
          free (nv);
          return NULL;
        }
      nv[li] = *extra_value;
    }
  return nv;
}
