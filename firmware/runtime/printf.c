/* printf to the console: %d %i %u %x %X %p %s %c %%, with the flags '-' and '0', a width (or '*'),
 * a precision for %s, and the length modifiers l (32-bit, as int) and ll (64-bit). No floating point. */
#include "pyard_rt.h"

/* Where formatted characters go: the console, or a buffer for snprintf. */
typedef struct {
  char *buf;
  size_t size, len;
} sink_t;

static void emit(sink_t *out, char c) {
  if (out->buf) {
    if (out->len + 1 < out->size) out->buf[out->len] = c;
  } else {
    PYARD_REG32(PYARD_CONSOLE_ADDR) = (unsigned char)c;
  }
  out->len++;
}

/* 64-bit value / 10 using only 32-bit division (no libgcc/compiler-rt needed): 16 bits at a time. */
static uint64_t div10(uint64_t n, unsigned *rem) {
  uint32_t hi = (uint32_t)(n >> 32), lo = (uint32_t)n;
  uint32_t qhi = hi / 10, r = hi % 10;
  uint32_t t = r << 16 | lo >> 16;
  uint32_t q1 = t / 10;
  t = (t % 10) << 16 | (lo & 0xffff);
  *rem = t % 10;
  return (uint64_t)qhi << 32 | (q1 << 16 | t / 10);
}

/* Digits of v (base 10 or 16), least significant first, into tmp; returns the count. */
static int digits(uint64_t v, unsigned base, int upper, char *tmp) {
  const char *set = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  int n = 0;
  do {
    unsigned d;
    if (base == 16) {
      d = (unsigned)(v & 15);
      v >>= 4;
    } else {
      v = div10(v, &d);
    }
    tmp[n++] = set[d];
  } while (v);
  return n;
}

typedef struct {
  int left, zero, width, precision;
} spec_t;

static void pad(sink_t *out, int n, char c) {
  while (n-- > 0) emit(out, c);
}

static void put_number(sink_t *out, const spec_t *sp, uint64_t v, int negative, unsigned base, int upper,
                       const char *prefix) {
  char tmp[24];
  int n = digits(v, base, upper, tmp);
  int extra = (negative ? 1 : 0) + (int)strlen(prefix);
  int fill = sp->width - n - extra;
  if (!sp->left && !sp->zero) pad(out, fill, ' ');
  if (negative) emit(out, '-');
  for (const char *p = prefix; *p; p++) emit(out, *p);
  if (!sp->left && sp->zero) pad(out, fill, '0');
  while (n) emit(out, tmp[--n]);
  if (sp->left) pad(out, fill, ' ');
}

static void put_string(sink_t *out, const spec_t *sp, const char *s) {
  if (!s) s = "(null)";
  int n = 0;
  while (s[n] && (sp->precision < 0 || n < sp->precision)) n++;
  if (!sp->left) pad(out, sp->width - n, ' ');
  for (int i = 0; i < n; i++) emit(out, s[i]);
  if (sp->left) pad(out, sp->width - n, ' ');
}

static int parse_int(const char **fmt, va_list *ap) {
  if (**fmt == '*') {
    (*fmt)++;
    return va_arg(*ap, int);
  }
  int v = 0;
  while (**fmt >= '0' && **fmt <= '9') v = v * 10 + (*(*fmt)++ - '0');
  return v;
}

static void format(sink_t *out, const char *fmt, va_list ap_in) {
  va_list ap;
  va_copy(ap, ap_in);
  for (; *fmt; fmt++) {
    if (*fmt != '%') {
      emit(out, *fmt);
      continue;
    }
    spec_t sp = {0, 0, 0, -1};
    for (;; fmt++) {
      if (fmt[1] == '-') sp.left = 1;
      else if (fmt[1] == '0') sp.zero = 1;
      else break;
    }
    fmt++;
    sp.width = parse_int(&fmt, &ap);
    if (sp.width < 0) sp.left = 1, sp.width = -sp.width;
    if (*fmt == '.') {
      fmt++;
      sp.precision = parse_int(&fmt, &ap);
    }
    int longlong = 0;
    while (*fmt == 'l' || *fmt == 'h' || *fmt == 'z') longlong += *fmt++ == 'l';
    longlong = longlong >= 2;
    switch (*fmt) {
      case 'd':
      case 'i': {
        int64_t v = longlong ? va_arg(ap, int64_t) : va_arg(ap, int);
        put_number(out, &sp, v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v, v < 0, 10, 0, "");
        break;
      }
      case 'u':
      case 'x':
      case 'X': {
        uint64_t v = longlong ? va_arg(ap, uint64_t) : va_arg(ap, unsigned);
        put_number(out, &sp, v, 0, *fmt == 'u' ? 10 : 16, *fmt == 'X', "");
        break;
      }
      case 'p':
        put_number(out, &sp, (uintptr_t)va_arg(ap, void *), 0, 16, 0, "0x");
        break;
      case 's':
        put_string(out, &sp, va_arg(ap, const char *));
        break;
      case 'c': {
        char c[2] = {(char)va_arg(ap, int), 0};
        sp.precision = 1;
        if (!c[0]) {  // a NUL character still counts as one
          if (!sp.left) pad(out, sp.width - 1, ' ');
          emit(out, 0);
          if (sp.left) pad(out, sp.width - 1, ' ');
        } else {
          put_string(out, &sp, c);
        }
        break;
      }
      case '%':
        emit(out, '%');
        break;
      case 0:
        fmt--;  // a lone '%' at the end
        break;
      default:  // unknown conversion: print it as written
        emit(out, '%');
        emit(out, *fmt);
    }
  }
  va_end(ap);
}

static pyard_lock_t console_lock;

int vprintf(const char *fmt, va_list ap) {
  sink_t out = {0, 0, 0};
  pyard_lock(&console_lock);
  format(&out, fmt, ap);
  pyard_unlock(&console_lock);
  return (int)out.len;
}

int printf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vprintf(fmt, ap);
  va_end(ap);
  return n;
}

int snprintf(char *buf, size_t size, const char *fmt, ...) {
  sink_t out = {buf, size, 0};
  va_list ap;
  va_start(ap, fmt);
  format(&out, fmt, ap);
  va_end(ap);
  if (size) buf[out.len < size ? out.len : size - 1] = 0;
  return (int)out.len;
}

int putchar(int c) {
  PYARD_REG32(PYARD_CONSOLE_ADDR) = (unsigned char)c;
  return (unsigned char)c;
}

int puts(const char *s) {
  pyard_lock(&console_lock);
  while (*s) putchar(*s++);
  putchar('\n');
  pyard_unlock(&console_lock);
  return 0;
}

/* The trap handler prints without the lock: the trapping hart may be the one holding it. */
void _pyard_printf_unlocked(const char *fmt, ...) {
  sink_t out = {0, 0, 0};
  va_list ap;
  va_start(ap, fmt);
  format(&out, fmt, ap);
  va_end(ap);
}
