import type { ExecutionResult } from 'graphql'
import { isAsyncIterable, type MutationExecution } from '../graphql'
import { replayHeader } from '../kit'

/** The Yoga server hooks the plugin adds to Envelop's; typed here so Yoga is not a dependency. */
export interface YogaHooks {
  onParams(payload: { context: object }): void
  onExecutionResult(payload: {
    context: object
    result: unknown
    setResult(result: ExecutionResult): void
  }): Promise<void> | undefined
  onResponse(payload: {
    request: Request
    response: Response
    setResponse(response: Response): void
  }): Promise<void> | undefined
}

/**
 * The operations Yoga runs, across Yoga's HTTP hooks. Yoga's masking plugin is registered after
 * user plugins, so only its `onExecutionResult` sees the result in the form the client gets it:
 * there the result is recorded. `onResponse` sets `Idempotent-Replay` on a replayed response,
 * and releases any lease whose end Yoga never reported.
 */
export class YogaRequests {
  /** Contexts Yoga runs an operation in (marked by `onParams`, a Yoga-only hook). */
  readonly #contexts = new WeakSet<object>()
  /** Executions by context, until their result hook. */
  readonly #executions = new WeakMap<object, MutationExecution>()
  /** Executions by request, until the request's response. */
  readonly #byRequest = new WeakMap<object, Set<MutationExecution>>()
  readonly #replayed = new WeakSet<object>()

  /** True when Yoga runs the operation of `context`; false under plain Envelop. */
  runs(context: object): boolean {
    return this.#contexts.has(context)
  }

  /**
   * Takes over the settling of `execution` when Yoga runs its operation (true); plain Envelop
   * (false) has no later hook, and settles it in `onExecuteDone`.
   */
  track(context: object, execution: MutationExecution): boolean {
    if (!this.#contexts.has(context)) return false
    this.#executions.set(context, execution)
    const request = requestOf(context)
    if (request) {
      const executions = this.#byRequest.get(request) ?? new Set<MutationExecution>()
      this.#byRequest.set(request, executions)
      executions.add(execution)
    }
    return true
  }

  /** Marks the response to the request behind `context` as a replay. */
  replayed(context: object): void {
    const request = requestOf(context)
    if (request) this.#replayed.add(request)
  }

  readonly hooks: YogaHooks = {
    onParams: ({ context }) => {
      this.#contexts.add(context)
    },

    onExecutionResult: ({ context, result, setResult }) => {
      const execution = this.#executions.get(context)
      if (!execution) return undefined
      this.#executions.delete(context)
      const visible =
        result === undefined || isAsyncIterable(result) ? undefined : (result as ExecutionResult)
      return execution.finish(visible).then((replacement) => {
        if (replacement) setResult(replacement)
      })
    },

    onResponse: ({ request, response, setResponse }) => {
      const executions = this.#byRequest.get(request)
      this.#byRequest.delete(request)
      if (this.#replayed.has(request)) markReplayed(response, setResponse)
      const unsettled = [...(executions ?? [])].filter((execution) => !execution.settled)
      if (unsettled.length === 0) return undefined
      // An operation whose end Yoga never reported (it threw past every hook): release its key
      // now rather than let it wait for the lease to run out.
      return Promise.all(unsettled.map((execution) => execution.finish(undefined))).then(
        () => undefined,
      )
    },
  }
}

function requestOf(context: object): object | undefined {
  return ((context as { request?: object | null }).request ?? undefined) as object | undefined
}

/** Sets `Idempotent-Replay: true` on `response`, or on a copy when its headers are immutable. */
function markReplayed(response: Response, setResponse: (response: Response) => void): void {
  try {
    response.headers.set(replayHeader, 'true')
  } catch {
    const headers = new Headers(response.headers)
    headers.set(replayHeader, 'true')
    setResponse(
      new Response(response.body, {
        status: response.status,
        statusText: response.statusText,
        headers,
      }),
    )
  }
}
