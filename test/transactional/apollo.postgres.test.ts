import { serveApollo } from './apollo-server'
import { describeGraphQLTransactional } from './graphql'

describeGraphQLTransactional('Apollo Server', serveApollo, 'im_tx_apollo')
