python -m skcontract explain: error: einstein sum subscript string does not contain proper '->' output specified: a '-' or '>' not part of '->' in 'ij,jk-'
