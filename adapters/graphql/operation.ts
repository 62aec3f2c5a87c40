import {
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  Kind,
  type OperationDefinitionNode,
  print,
  type SelectionNode,
  type SelectionSetNode,
  valueFromASTUntyped,
} from 'graphql'
import { validateKey } from '../../src/key'

type Variables = Readonly<Record<string, unknown>>

/** What the plugin needs to know about the selected mutation operation. */
export interface MutationAnalysis {
  /** The root fields that run (after `@skip`/`@include`), through fragments, in order. */
  rootFields: FieldNode[]
  /** Sorted, distinct root field names: the engine's `operation`. */
  fieldNames: string[]
  /** The fragments the operation uses, directly or through other fragments. */
  fragments: FragmentDefinitionNode[]
  /** Whether the operation asks for incremental delivery (`@defer` or `@stream`). */
  incremental: boolean
}

const incrementalDirectives = new Set(['defer', 'stream'])

/** What does not depend on the variables: worked out once per operation of a document. */
interface OperationShape {
  fragmentsByName: Map<string, FragmentDefinitionNode>
  fragments: FragmentDefinitionNode[]
  incremental: boolean
  /** The analysis itself when no root-level selection has a directive (no `@skip`/`@include`). */
  fixed: MutationAnalysis | undefined
}

/**
 * Per document, then per operation. Servers reuse the parsed document of a query they have
 * seen (Yoga's parse cache), and GraphQL ASTs are not mutated once parsed, so the walk and the
 * `print` are done once per document instead of on every request. Weak, so documents that go
 * out of a server's cache are not kept alive here.
 */
const shapes = new WeakMap<DocumentNode, Map<OperationDefinitionNode, OperationShape>>()

function shapeOf(document: DocumentNode, operation: OperationDefinitionNode): OperationShape {
  let byOperation = shapes.get(document)
  if (byOperation === undefined) {
    byOperation = new Map()
    shapes.set(document, byOperation)
  }
  let shape = byOperation.get(operation)
  if (shape !== undefined) return shape

  const fragmentsByName = new Map<string, FragmentDefinitionNode>()
  for (const definition of document.definitions) {
    if (definition.kind === Kind.FRAGMENT_DEFINITION) {
      fragmentsByName.set(definition.name.value, definition)
    }
  }

  // All fragments the operation reaches, and whether any selection asks for @defer/@stream.
  const used = new Map<string, FragmentDefinitionNode>()
  let incremental = false
  const walk = (selectionSet: SelectionSetNode): void => {
    for (const selection of selectionSet.selections) {
      if (selection.directives?.some((d) => incrementalDirectives.has(d.name.value))) {
        incremental = true
      }
      if (selection.kind === Kind.FRAGMENT_SPREAD) {
        const name = selection.name.value
        const fragment = fragmentsByName.get(name)
        if (fragment && !used.has(name)) {
          used.set(name, fragment)
          walk(fragment.selectionSet)
        }
      } else if (selection.selectionSet) {
        walk(selection.selectionSet)
      }
    }
  }
  walk(operation.selectionSet)
  const fragments = Object.freeze(
    [...used.values()].sort((a, b) => (a.name.value < b.name.value ? -1 : 1)),
  ) as FragmentDefinitionNode[]
  shape = { fragmentsByName, fragments, incremental, fixed: undefined }

  // Without directives at the root level, the root fields do not depend on the variables.
  let directives = false
  const visited = new Set<string>()
  const look = (selectionSet: SelectionSetNode): void => {
    for (const selection of selectionSet.selections) {
      if (selection.directives?.length) directives = true
      if (selection.kind === Kind.INLINE_FRAGMENT) look(selection.selectionSet)
      else if (selection.kind === Kind.FRAGMENT_SPREAD) {
        const fragment = fragmentsByName.get(selection.name.value)
        if (fragment && !visited.has(fragment.name.value)) {
          visited.add(fragment.name.value)
          look(fragment.selectionSet)
        }
      }
    }
  }
  look(operation.selectionSet)
  if (!directives) {
    // Shared by every request of this document: frozen, so no caller can change it for the next.
    const fixed = collectRootFields(shape, operation, {})
    Object.freeze(fixed.rootFields)
    Object.freeze(fixed.fieldNames)
    shape.fixed = Object.freeze(fixed)
  }
  byOperation.set(operation, shape)
  return shape
}

export function analyzeMutation(
  document: DocumentNode,
  operation: OperationDefinitionNode,
  variables: Variables,
): MutationAnalysis {
  const shape = shapeOf(document, operation)
  return shape.fixed ?? collectRootFields(shape, operation, variables)
}

/**
 * Root fields the executor will run: the same walk as graphql-js' collectFields, limited to the
 * root level (mutation root fields run serially, so each one is an effect).
 */
function collectRootFields(
  shape: OperationShape,
  operation: OperationDefinitionNode,
  variables: Variables,
): MutationAnalysis {
  const rootFields: FieldNode[] = []
  const visited = new Set<string>()
  const values = withBooleanDefaults(operation, variables)
  const collect = (selectionSet: SelectionSetNode): void => {
    for (const selection of selectionSet.selections) {
      if (!isIncluded(selection, values)) continue
      if (selection.kind === Kind.FIELD) rootFields.push(selection)
      else if (selection.kind === Kind.INLINE_FRAGMENT) collect(selection.selectionSet)
      else {
        const name = selection.name.value
        const fragment = shape.fragmentsByName.get(name)
        if (fragment && !visited.has(name)) {
          visited.add(name)
          collect(fragment.selectionSet)
        }
      }
    }
  }
  collect(operation.selectionSet)

  const fieldNames = [...new Set(rootFields.map((field) => field.name.value))].sort()
  return { rootFields, fieldNames, fragments: shape.fragments, incremental: shape.incremental }
}

/**
 * The request's variables, plus the boolean defaults the operation declares for those it does
 * not give (`mutation ($dry: Boolean = true)`), as the executor coerces them for `@skip(if:)`.
 */
function withBooleanDefaults(operation: OperationDefinitionNode, variables: Variables): Variables {
  let values = variables
  for (const definition of operation.variableDefinitions ?? []) {
    const name = definition.variable.name.value
    if (definition.defaultValue?.kind !== Kind.BOOLEAN || Object.hasOwn(variables, name)) continue
    if (values === variables) values = { ...variables }
    ;(values as Record<string, unknown>)[name] = definition.defaultValue.value
  }
  return values
}

/**
 * False when `@skip(if: true)` or `@include(if: false)` leaves `selection` out, with `if` a
 * literal or a variable the request gives as a boolean. Read from the directive nodes rather
 * than through graphql's `getDirectiveValues`, whose variables argument changed shape in
 * graphql 17. Anything else (a missing or non-boolean variable, which the executor refuses with
 * a proper error) counts the field: the conservative choice, since it can only make the key
 * required, never drop it.
 */
function isIncluded(selection: SelectionNode, variables: Variables): boolean {
  for (const directive of selection.directives ?? []) {
    const name = directive.name.value
    if (name !== 'skip' && name !== 'include') continue
    const value = directive.arguments?.find((argument) => argument.name.value === 'if')?.value
    let condition: unknown
    if (value?.kind === Kind.BOOLEAN) condition = value.value
    else if (value?.kind === Kind.VARIABLE) condition = variables[value.name.value]
    if (typeof condition !== 'boolean') continue
    if (name === 'skip' ? condition : !condition) return false
  }
  return true
}

/**
 * The payload whose fingerprint guards a key: the selected operation and the fragments it
 * uses, parsed and printed (so whitespace, comments and unrelated operations in the document
 * do not count), its name, and the variables it declares.
 */
export function fingerprintPayload(
  operation: OperationDefinitionNode,
  analysis: MutationAnalysis,
  variables: Variables,
): unknown {
  const document = printedOperation(operation, analysis.fragments)
  const declared: Record<string, unknown> = {}
  for (const definition of operation.variableDefinitions ?? []) {
    const name = definition.variable.name.value
    if (variables[name] !== undefined) declared[name] = variables[name]
  }
  return { operationName: operation.name?.value ?? null, document, variables: declared }
}

/**
 * The operation and the fragments it uses, printed: once per operation of a parsed document
 * (`fragments` is the array the document's analysis keeps, so it identifies the document).
 */
const printed = new WeakMap<
  OperationDefinitionNode,
  Map<readonly FragmentDefinitionNode[], string>
>()

function printedOperation(
  operation: OperationDefinitionNode,
  fragments: readonly FragmentDefinitionNode[],
): string {
  let byFragments = printed.get(operation)
  if (byFragments === undefined) {
    byFragments = new Map()
    printed.set(operation, byFragments)
  }
  let text = byFragments.get(fragments)
  if (text === undefined) {
    text = print({ kind: Kind.DOCUMENT, definitions: [operation, ...fragments] })
    byFragments.set(fragments, text)
  }
  return text
}

/**
 * Keys sent as a root-field argument named `keyField`, or as a field of the root field's
 * `input` object argument; literal or through variables. Each key is validated.
 */
export function argumentKeys(
  rootFields: readonly FieldNode[],
  keyField: string,
  variables: Variables,
): string[] {
  const keys: string[] = []
  const add = (value: unknown) => {
    if (value !== undefined && value !== null) keys.push(validateKey(value))
  }
  for (const field of rootFields) {
    for (const argument of field.arguments ?? []) {
      if (argument.name.value === keyField) {
        add(valueFromASTUntyped(argument.value, variables))
      } else if (argument.name.value === 'input') {
        const input: unknown = valueFromASTUntyped(argument.value, variables)
        if (input !== null && typeof input === 'object' && !Array.isArray(input)) {
          add((input as Record<string, unknown>)[keyField])
        }
      }
    }
  }
  return keys
}
