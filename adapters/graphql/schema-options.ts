import {
  type ConstDirectiveNode,
  type GraphQLField,
  type GraphQLSchema,
  valueFromASTUntyped,
} from 'graphql'
import { type Duration, toMilliseconds } from '../../src/duration'

/** The directive's name in SDL: `@idempotent(required: Boolean, ttl: Int)`. */
export const idempotentDirectiveName = 'idempotent'

/**
 * The `@idempotent` directive definition, to add to SDL-first type definitions
 * (`typeDefs: [idempotentDirectiveTypeDefs, yourTypeDefs]`).
 */
export const idempotentDirectiveTypeDefs = /* GraphQL */ `
"""
Makes a mutation field retry-safe: a call with an Idempotency-Key runs once and its result is
replayed to every retry (idempotent-mutations).
"""
directive @idempotent(
  """
  Reject calls without a key (400 IDEMPOTENCY_KEY_REQUIRED).
  """
  required: Boolean
  """
  How long the result is replayed, in seconds.
  """
  ttl: Int
) on FIELD_DEFINITION
`

/**
 * Code-first options of a mutation field: `extensions: { idempotency: { required, ttl } }`
 * (graphql-js `GraphQLObjectType` fields, Pothos, Nexus).
 */
export interface IdempotencyFieldOptions {
  /** Reject calls of this field that arrive without a key. @default the engine's `required` */
  required?: boolean | undefined
  /**
   * How long the result is replayed: milliseconds or a string such as `'1h'` (unlike SDL's
   * `ttl: Int`, which is in seconds). @default the engine's `ttl`
   */
  ttl?: Duration | undefined
}

/** What one marked mutation field asks for; `ttl` already in milliseconds. */
export interface FieldPolicy {
  required: boolean | undefined
  ttl: number | undefined
}

const policiesBySchema = new WeakMap<GraphQLSchema, ReadonlyMap<string, FieldPolicy>>()

/**
 * The policies of the schema's marked mutation fields, by field name. Read once per schema
 * object and cached; throws a TypeError naming the field when an option is malformed, so a
 * misconfigured schema fails when the server starts rather than on some later request.
 */
export function fieldPolicies(schema: GraphQLSchema): ReadonlyMap<string, FieldPolicy> {
  let policies = policiesBySchema.get(schema)
  if (policies === undefined) {
    policies = readPolicies(schema)
    policiesBySchema.set(schema, policies)
  }
  return policies
}

function readPolicies(schema: GraphQLSchema): ReadonlyMap<string, FieldPolicy> {
  const policies = new Map<string, FieldPolicy>()
  const mutationType = schema.getMutationType()
  if (!mutationType) return policies
  for (const field of Object.values(mutationType.getFields())) {
    const where = `${mutationType.name}.${field.name}`
    const fromDirective = directivePolicy(field, where)
    const fromExtensions = extensionsPolicy(field, where)
    if (fromDirective && fromExtensions) {
      throw new TypeError(
        `idempotent-mutations: ${where} declares its idempotency options twice (@idempotent and extensions.idempotency); keep one`,
      )
    }
    const policy = fromDirective ?? fromExtensions
    if (policy) policies.set(field.name, policy)
  }
  return policies
}

function directivePolicy(
  field: GraphQLField<unknown, unknown>,
  where: string,
): FieldPolicy | undefined {
  const directives = (field.astNode?.directives ?? []).filter(
    (d: ConstDirectiveNode) => d.name.value === idempotentDirectiveName,
  )
  if (directives.length === 0) return undefined
  if (directives.length > 1) {
    throw new TypeError(`idempotent-mutations: ${where} has @idempotent more than once`)
  }
  const policy: FieldPolicy = { required: undefined, ttl: undefined }
  for (const argument of directives[0]!.arguments ?? []) {
    const value: unknown = valueFromASTUntyped(argument.value)
    if (value === null) continue
    if (argument.name.value === 'required') {
      if (typeof value !== 'boolean') {
        throw new TypeError(
          `idempotent-mutations: @idempotent(required:) on ${where} must be a Boolean`,
        )
      }
      policy.required = value
    } else if (argument.name.value === 'ttl') {
      if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) {
        throw new TypeError(
          `idempotent-mutations: @idempotent(ttl:) on ${where} must be a non-negative whole number of seconds (got ${JSON.stringify(value)})`,
        )
      }
      policy.ttl = value * 1000
    } else {
      throw new TypeError(
        `idempotent-mutations: @idempotent on ${where} has an unknown argument "${argument.name.value}" (known: required, ttl)`,
      )
    }
  }
  return policy
}

function extensionsPolicy(
  field: GraphQLField<unknown, unknown>,
  where: string,
): FieldPolicy | undefined {
  const raw = (field.extensions as { idempotency?: unknown } | null | undefined)?.idempotency
  if (raw === undefined || raw === null) return undefined
  if (typeof raw !== 'object' || Array.isArray(raw)) {
    throw new TypeError(
      `idempotent-mutations: extensions.idempotency on ${where} must be an object { required?, ttl? }`,
    )
  }
  const { required, ttl, ...unknown } = raw as IdempotencyFieldOptions & Record<string, unknown>
  const unknownNames = Object.keys(unknown)
  if (unknownNames.length > 0) {
    throw new TypeError(
      `idempotent-mutations: extensions.idempotency on ${where} has unknown option(s) ${unknownNames.join(', ')} (known: required, ttl)`,
    )
  }
  if (required !== undefined && typeof required !== 'boolean') {
    throw new TypeError(
      `idempotent-mutations: extensions.idempotency.required on ${where} must be a boolean`,
    )
  }
  return {
    required,
    ttl:
      ttl === undefined ? undefined : toMilliseconds(ttl, `extensions.idempotency.ttl on ${where}`),
  }
}

/**
 * One record covers the whole mutation operation: it requires a key if any of its root fields
 * does, and keeps the shortest `ttl` among them. `undefined` leaves the engine's default.
 */
export function combinePolicies(policies: readonly (FieldPolicy | undefined)[]): FieldPolicy {
  let required: boolean | undefined
  if (policies.some((p) => p?.required === true)) required = true
  else if (policies.length > 0 && policies.every((p) => p?.required === false)) required = false
  let ttl: number | undefined
  for (const policy of policies) {
    if (policy?.ttl !== undefined && (ttl === undefined || policy.ttl < ttl)) ttl = policy.ttl
  }
  return { required, ttl }
}
