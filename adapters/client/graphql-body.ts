import type { DocumentNode, OperationDefinitionNode, ValueNode } from 'graphql'
import { defaultKeyField } from '../../src/key'

/**
 * Reading a GraphQL-over-HTTP request as `idempotentFetch` needs it: its payload (a JSON body or
 * a multipart upload's `operations`), whether an operation is a mutation, and the key an
 * operation already names.
 */

type GraphQLModule = Pick<typeof import('graphql'), 'parse' | 'getOperationAST' | 'Kind'>

// `graphql` is an optional peer: it is loaded the first time a body may hold a mutation, so
// a tRPC-only user of 'idempotent-mutations/client' does not need it installed.
let graphqlModule: Promise<GraphQLModule> | undefined
const loadGraphQL = () => {
  graphqlModule ??= import('graphql')
  return graphqlModule
}

/** A GraphQL-over-HTTP request body: one operation. */
export interface OperationBody {
  query?: unknown | undefined
  operationName?: unknown | undefined
  variables?: unknown | undefined
  extensions?: unknown | undefined
}

/**
 * The request's GraphQL payload: a JSON string body, or the `operations` field of a
 * multipart upload (graphql-multipart-request-spec). Other bodies are not GraphQL-over-HTTP
 * requests this wrapper can read, so they pass through.
 */
export async function readBody(
  request: Request | undefined,
  init: RequestInit | undefined,
): Promise<
  { operations: string; original: BodyInit; rewrite: (operations: string) => BodyInit } | undefined
> {
  let body: unknown = init?.body
  if ((body === undefined || body === null) && request?.body) {
    const type = request.headers.get('content-type') ?? ''
    if (/json/i.test(type)) body = await request.clone().text()
    else if (/multipart\/form-data/i.test(type)) body = await request.clone().formData()
    else return undefined
  }
  if (typeof body === 'string') return { operations: body, original: body, rewrite: (text) => text }
  if (typeof FormData !== 'undefined' && body instanceof FormData) {
    const operations = body.get('operations')
    if (typeof operations !== 'string') return undefined
    return {
      operations,
      original: body,
      rewrite: (text) => {
        const copy = new FormData()
        body.forEach((value, name) => {
          copy.append(name, name === 'operations' ? text : value)
        })
        return copy
      },
    }
  }
  return undefined
}

/**
 * Whether the operation the server will run is a mutation: the document is parsed and the
 * operation selected by `operationName`, as the server does. A document that does not parse,
 * or names no single operation, is left to the server to reject.
 */
export async function isMutation(operation: OperationBody): Promise<boolean> {
  const found = await selectedOperation(operation)
  return found?.operation === 'mutation'
}

const selections = new WeakMap<OperationBody, OperationDefinitionNode | null>()

async function selectedOperation(
  operation: OperationBody,
): Promise<OperationDefinitionNode | undefined> {
  const cached = selections.get(operation)
  if (cached !== undefined) return cached ?? undefined
  const { query, operationName } = operation
  let found: OperationDefinitionNode | null = null
  // Every mutation document contains the keyword, so a document without it is not parsed.
  if (typeof query === 'string' && query.includes('mutation')) {
    const graphql = await loadGraphQL()
    let document: DocumentNode | undefined
    try {
      document = graphql.parse(query, { noLocation: true })
    } catch {
      document = undefined
    }
    if (document !== undefined) {
      found =
        graphql.getOperationAST(
          document,
          typeof operationName === 'string' ? operationName : undefined,
        ) ?? null
    }
  }
  selections.set(operation, found)
  return found ?? undefined
}

/**
 * The key a root field of the mutation passes itself, if any: an `idempotencyKey` argument, or
 * an `input` argument (object literal or variable) with an `idempotencyKey` field. Sending a
 * header too would name the operation twice, which the server answers with `KEY_INVALID`.
 */
export async function argumentKey(operation: OperationBody): Promise<string | undefined> {
  const definition = await selectedOperation(operation)
  if (definition === undefined) return undefined
  const { Kind } = await loadGraphQL()
  const variables = isRecord(operation.variables) ? operation.variables : {}
  const read = (value: ValueNode | undefined): string | undefined => {
    if (value?.kind === Kind.STRING) return value.value
    if (value?.kind !== Kind.VARIABLE) return undefined
    const bound = variables[value.name.value]
    return typeof bound === 'string' ? bound : undefined
  }
  for (const selection of definition.selectionSet.selections) {
    if (selection.kind !== Kind.FIELD) continue
    for (const { name, value } of selection.arguments ?? []) {
      let key: string | undefined
      if (name.value === defaultKeyField) key = read(value)
      else if (name.value === 'input' && value.kind === Kind.OBJECT) {
        key = read(value.fields.find((field) => field.name.value === defaultKeyField)?.value)
      } else if (name.value === 'input' && value.kind === Kind.VARIABLE) {
        const input = variables[value.name.value]
        const bound = isRecord(input) ? input[defaultKeyField] : undefined
        key = typeof bound === 'string' ? bound : undefined
      }
      if (key !== undefined) return key
    }
  }
  return undefined
}

export function extensionKey(operation: OperationBody): string | undefined {
  const key = isRecord(operation.extensions) ? operation.extensions[defaultKeyField] : undefined
  return typeof key === 'string' ? key : undefined
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}
