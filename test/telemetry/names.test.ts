import { readFile } from 'node:fs/promises'
import { describe, expect, it } from 'vitest'
import { attributeNames, metricNames } from '../../src/telemetry'

const page = await readFile(new URL('../../docs/observability.md', import.meta.url), 'utf8')

/** docs/observability.md lists every name the library records under, with its unit. */
describe('the observability page', () => {
  it.each(Object.values(attributeNames))('documents the attribute %s', (name) => {
    expect(page).toMatch(new RegExp(`^\\| \`${name.replaceAll('.', '\\.')}\` \\|`, 'm'))
  })

  it.each(Object.values(metricNames))('documents the metric %s', (name) => {
    expect(page).toMatch(
      new RegExp(`^\\| \`${name.replaceAll('.', '\\.')}\` \\| (counter|histogram) \\|`, 'm'),
    )
  })
})
