/** The servers a bench may flood: this machine's only. */

const loopback = /^[a-z]+:\/\/([^@/]*@)?(127\.0\.0\.1|localhost|\[::1\])(:\d+)?(\/|$)/

/** Throws unless `url` (from the variable `name`) is unset or points at a loopback address. */
export function checkLoopback(name: string, url: string | undefined): void {
  if (url && !loopback.test(url)) {
    throw new Error(`bench: ${name} must point at a loopback address (127.0.0.1, localhost, ::1)`)
  }
}
