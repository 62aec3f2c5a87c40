/** Markdown tables for the results files. */

/** A table cell: `–` for a missing or NaN value. */
export const cell = (value: number | string | undefined) =>
  value === undefined || (typeof value === 'number' && Number.isNaN(value)) ? '–' : String(value)

export function table(header: string[], rows: (number | string | undefined)[][]): string {
  return [
    `| ${header.join(' | ')} |`,
    `|${header.map(() => '---').join('|')}|`,
    ...rows.map((row) => `| ${row.map(cell).join(' | ')} |`),
  ].join('\n')
}
