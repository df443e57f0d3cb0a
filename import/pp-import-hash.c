/* pp-import-hash.c — see pp-import-hash.h. */
#include "pp-import-hash.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static uint64_t key[2];
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static atomic_size_t probes;

static uint64_t
mix (uint64_t x)
{
  /* splitmix64's finalizer: a fallback key from what a process has */
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static void
key_init (void)
{
  if (getrandom (key, sizeof key, GRND_NONBLOCK) == (ssize_t) sizeof key)
    return;
  /* no entropy yet (early boot): still unknown to a file's author */
  struct timespec ts;
  clock_gettime (CLOCK_REALTIME, &ts);
  key[0] = mix ((uint64_t) ts.tv_nsec ^ ((uint64_t) ts.tv_sec << 20) ^ (uint64_t) (uintptr_t) &ts);
  key[1] = mix (key[0] ^ (uint64_t) getpid () ^ (uint64_t) (uintptr_t) &key_init);
}

#define ROTL(x, b) (((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                   \
  do {                                                             \
    v0 += v1; v1 = ROTL (v1, 13); v1 ^= v0; v0 = ROTL (v0, 32);    \
    v2 += v3; v3 = ROTL (v3, 16); v3 ^= v2;                        \
    v0 += v3; v3 = ROTL (v3, 21); v3 ^= v0;                        \
    v2 += v1; v1 = ROTL (v1, 17); v1 ^= v2; v2 = ROTL (v2, 32);    \
  } while (0)

/* SipHash-1-3 (one compression round, three finalization rounds) of
 * s[len] under key: the reference algorithm, little-endian words. */
static uint64_t
siphash13 (const unsigned char *s, size_t len)
{
  uint64_t v0 = 0x736f6d6570736575ull ^ key[0], v1 = 0x646f72616e646f6dull ^ key[1];
  uint64_t v2 = 0x6c7967656e657261ull ^ key[0], v3 = 0x7465646279746573ull ^ key[1];
  size_t i = 0;
  for (; i + 8 <= len; i += 8)
    {
      uint64_t m = 0;
      for (int k = 0; k < 8; k++)
        m |= (uint64_t) s[i + k] << (8 * k);
      v3 ^= m;
      SIPROUND;
      v0 ^= m;
    }
  uint64_t b = (uint64_t) len << 56;
  for (int k = 0; i + (size_t) k < len; k++)
    b |= (uint64_t) s[i + (size_t) k] << (8 * k);
  v3 ^= b;
  SIPROUND;
  v0 ^= b;
  v2 ^= 0xff;
  SIPROUND;
  SIPROUND;
  SIPROUND;
  return v0 ^ v1 ^ v2 ^ v3;
}

uint64_t
pp_import_hash (const char *s)
{
  pthread_once (&key_once, key_init);
  return siphash13 ((const unsigned char *) s, strlen (s));
}

void
pp_import_hash_probed (size_t n)
{
  atomic_fetch_add_explicit (&probes, n, memory_order_relaxed);
}

size_t
pp_import_hash_probes (void)
{
  return atomic_load_explicit (&probes, memory_order_relaxed);
}
