import { describeGraphQLTransactional } from './graphql'
import { serveYoga } from './servers'

describeGraphQLTransactional('GraphQL Yoga', serveYoga, 'im_tx_yoga')
