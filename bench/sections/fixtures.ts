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
