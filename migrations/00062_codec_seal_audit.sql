-- +goose Up
-- +goose StatementBegin
-- Each payload the codec endpoint seals for a workflow is a support action
-- of its own (codec_seal): who, for which workflow, why.
ALTER TABLE support_actions DROP CONSTRAINT support_actions_action_check,
    ADD CONSTRAINT support_actions_action_check CHECK (action IN ('attribute_payment', 'extend', 'end_early',
        'retry_provisioning', 'cancel', 'refund', 'refund_exception', 'resolve_exception', 'value_exception',
        'repair_host', 'retire_host', 'close_host_flag', 'codec_seal'));
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
ALTER TABLE support_actions DROP CONSTRAINT support_actions_action_check,
    ADD CONSTRAINT support_actions_action_check CHECK (action IN ('attribute_payment', 'extend', 'end_early',
        'retry_provisioning', 'cancel', 'refund', 'refund_exception', 'resolve_exception', 'value_exception',
        'repair_host', 'retire_host', 'close_host_flag'));
-- +goose StatementEnd
