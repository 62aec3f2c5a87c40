/** The one mutation every section runs: create an order. */

export interface OrderInput {
  item: string
  quantity: number
  customer: { id: string; tier: string }
  notes: string[]
}

export interface Order {
  id: string
  item: string
  quantity: number
  total: number
}

/** A small, realistic payload: a few fields, one nested object, one array. */
export const orderInput: OrderInput = {
  item: 'standing desk',
  quantity: 2,
  customer: { id: 'customer-42', tier: 'gold' },
  notes: ['gift wrap', 'leave at the door'],
}

/** One line of {@link orderOfSize}: strings and numbers, as an order's lines hold them. */
interface OrderLine {
  sku: string
  name: string
  quantity: number
  unitPrice: number
  tags: string[]
}

/**
 * A realistic JSON document of about `bytes` bytes of JSON (within one line, ~120 bytes): an
 * order with a customer and an array of lines, each with strings and numbers of its own.
 */
export function orderOfSize(bytes: number): { id: string; customer: object; lines: OrderLine[] } {
  const order = {
    id: `order-${bytes}`,
    customer: { id: 'customer-42', name: 'Ada Lovelace', tier: 'gold' },
    lines: [] as OrderLine[],
  }
  let size = JSON.stringify(order).length
  for (let i = 0; size < bytes; i++) {
    const line: OrderLine = {
      sku: `SKU-${String(i).padStart(6, '0')}`,
      name: `standing desk, oak, ${120 + (i % 60)} cm`,
      quantity: 1 + (i % 7),
      unitPrice: 99.75 + (i % 100),
      tags: ['furniture', i % 2 === 0 ? 'office' : 'home'],
    }
    order.lines.push(line)
    size += JSON.stringify(line).length + 1
  }
  return order
}
