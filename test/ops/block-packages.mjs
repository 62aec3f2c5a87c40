// A module resolve hook for the CLI's child processes: the packages named in
// CLI_TEST_BLOCKED (a JSON array) cannot be found, as if they were not installed, so a test
// can make the CLI load its second choice of driver (pg instead of postgres, redis instead of
// ioredis), or none.
import { register } from 'node:module'

if (process.env.CLI_TEST_BLOCKED) {
  register(
    `data:text/javascript,${encodeURIComponent(`
const blocked = ${process.env.CLI_TEST_BLOCKED}
export async function resolve(specifier, context, next) {
  if (blocked.some((name) => specifier === name || specifier.startsWith(name + '/'))) {
    throw Object.assign(new Error("Cannot find package '" + specifier + "' (blocked by the test)"), {
      code: 'ERR_MODULE_NOT_FOUND',
    })
  }
  return next(specifier, context)
}`)}`,
  )
}
