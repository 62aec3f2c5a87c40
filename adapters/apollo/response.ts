import { type GraphQLResponse, HeaderMap, type HTTPGraphQLHead } from '@apollo/server'
import type { ExecutionResult, GraphQLFormattedError } from 'graphql'
import type { RecordedResult } from '../graphql'
import { replayHeader } from '../kit'

type FormattedResult = Extract<GraphQLResponse['body'], { kind: 'single' }>['singleResult']

/**
 * A result in the form Apollo Server sends it, and the HTTP head its errors ask for. Apollo does
 * this to every error it formats (`extensions.http` becomes the status and headers, and leaves
 * the body); a response a plugin returns from `responseForOperation` is sent as it is, so the
 * plugin does it for its own errors and for replays. An error already formatted (a recorded
 * one) keeps its fields and their order: a replay is byte-identical to the first answer.
 */
export function formatResult(result: object): {
  singleResult: FormattedResult
  http: HTTPGraphQLHead
} {
  const http: HTTPGraphQLHead = { status: undefined, headers: new HeaderMap() }
  const singleResult: Record<string, unknown> = {}
  for (const [name, value] of Object.entries(result)) {
    if (value === undefined) continue
    singleResult[name] =
      name === 'errors' && Array.isArray(value)
        ? value.map((error: unknown) => formatError(error, http))
        : value
  }
  return { singleResult: singleResult as FormattedResult, http }
}

function formatError(error: unknown, http: HTTPGraphQLHead): GraphQLFormattedError {
  const json: Record<string, unknown> = {
    ...(error instanceof Error && typeof (error as { toJSON?: unknown }).toJSON === 'function'
      ? (error as Error & { toJSON(): GraphQLFormattedError }).toJSON()
      : (error as object)),
  }
  // Kept in a record written by a Yoga server (an unmasked unexpected error); not for clients.
  delete json.unexpectedOrigin
  const extensions = json.extensions as Record<string, unknown> | undefined
  const head = extensions?.http as { status?: unknown; headers?: unknown } | undefined
  if (extensions && head !== null && typeof head === 'object') {
    if (typeof head.status === 'number') http.status = head.status
    const headers = head.headers instanceof Map ? head.headers : Object.entries(head.headers ?? {})
    for (const [name, value] of headers) http.headers.set(String(name), String(value))
    const { http: _, ...rest } = extensions
    json.extensions = rest
  }
  return json as unknown as GraphQLFormattedError
}

/** The answer to a request refused by the plugin: its error, status and `Retry-After`. */
export function refusalResponse(result: ExecutionResult): GraphQLResponse {
  const { singleResult, http } = formatResult(result)
  return { http, body: { kind: 'single', singleResult } }
}

/** The recorded answer, with its status and `Idempotent-Replay: true`. */
export function replayResponse(recorded: RecordedResult): GraphQLResponse {
  const { singleResult, http } = formatResult(recorded.graphqlResult)
  if (recorded.status !== undefined) http.status = recorded.status
  http.headers.set(replayHeader, 'true')
  return { http, body: { kind: 'single', singleResult } }
}
