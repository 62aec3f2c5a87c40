export {
  defaultHttpStoreStatus,
  type HttpIdempotencyOptions,
  type ResolvedHttpOptions,
  resolveHttpOptions,
} from './options'
export { type RecordedResponse, readForRecord, replayResponse } from './record'
export { type HttpHandlerContext, problemResponse, respondIdempotently } from './respond'
