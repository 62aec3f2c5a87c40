import { describeGraphQLTransactional } from './graphql'
import { serveApollo } from './servers'

describeGraphQLTransactional('Apollo Server', serveApollo, 'im_tx_apollo')
